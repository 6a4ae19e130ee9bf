/**
 * `@safe-retries/client`: a retrying, idempotent HTTP client for the payments
 * API. Imports nothing from the server (no Nest, no `node:` modules).
 */
export { PaymentsClient } from './api';
export type {
  CreateOrderRequest,
  CreatePaymentRequest,
  CurrencyCode,
  KeyOutcome,
  MinorUnits,
  Order,
  OrderItem,
  OrderStatus,
  Payment,
  PaymentStatus,
  Refund,
  RefundRequest,
  RefundStatus,
} from './api-types';
export { IdempotentClient } from './idempotent-client';
export type {
  ClientResponse,
  FetchLike,
  GetOptions,
  IdempotentClientOptions,
  PostOptions,
  RetryEvent,
  RetryReason,
} from './client-options';
export { backoffCap, backoffDelay, DEFAULT_RETRY_STATUSES, isRetryableStatus, parseRetryAfter } from './backoff';
export { INVALID_RESPONSE_CODE, NetworkError, ProblemError, UNKNOWN_PROBLEM_CODE } from './errors';
export type { NetworkFailure, ProblemDetails } from './errors';
export { keyFor, MAX_IDEMPOTENCY_KEY_LENGTH, newIdempotencyKey } from './keys';
export { verifyWebhook, WebhookVerificationError } from './webhooks';
export type { VerifyWebhookOptions, WebhookEvent, WebhookFailure, WebhookHeaders } from './webhooks';
