import { ProblemException } from '../common/problem';

/**
 * The idempotency layer's problems. Their `type` is the published policy page
 * and they carry `Link: <policy>; rel="describedby"` (IETF draft
 * draft-ietf-httpapi-idempotency-key-header).
 */
export enum IdempotencyErrorCode {
  KeyMissing = 'idempotency_key_missing',
  KeyInvalid = 'idempotency_key_invalid',
  KeyReused = 'idempotency_key_reused',
  InProgress = 'idempotency_request_in_progress',
  LeaseLost = 'idempotency_lease_lost',
}

export class IdempotencyException extends ProblemException {
  constructor(
    policyUrl: string,
    status: number,
    code: IdempotencyErrorCode,
    title: string,
    detail: string,
    headers: Record<string, string> = {},
  ) {
    super({
      status,
      code,
      title,
      detail,
      type: `${policyUrl}#${code}`,
      headers: { Link: `<${policyUrl}>; rel="describedby"`, ...headers },
    });
  }
}

export const idempotencyErrors = {
  missing: (policyUrl: string) =>
    new IdempotencyException(
      policyUrl,
      400,
      IdempotencyErrorCode.KeyMissing,
      'Idempotency-Key Missing',
      'This endpoint requires an Idempotency-Key header: one unique value per operation, reused on every retry.',
    ),
  invalid: (policyUrl: string, reason: string) =>
    new IdempotencyException(
      policyUrl,
      400,
      IdempotencyErrorCode.KeyInvalid,
      'Idempotency-Key Invalid',
      `The Idempotency-Key header is invalid: ${reason}. Send 1 to 255 printable ASCII characters, bare or as a quoted string.`,
    ),
  reused: (policyUrl: string) =>
    new IdempotencyException(
      policyUrl,
      422,
      IdempotencyErrorCode.KeyReused,
      'Idempotency-Key Reused',
      'This Idempotency-Key was already used with a different request (method, path, query or body). Use a new key for a new operation.',
    ),
  inProgress: (policyUrl: string, retryAfterSeconds: number) =>
    new IdempotencyException(
      policyUrl,
      409,
      IdempotencyErrorCode.InProgress,
      'Request In Progress',
      'A request with this Idempotency-Key is still being processed. Retry after the delay in Retry-After with the same key and body.',
      { 'Retry-After': String(retryAfterSeconds) },
    ),
  leaseLost: (policyUrl: string) =>
    new IdempotencyException(
      policyUrl,
      409,
      IdempotencyErrorCode.LeaseLost,
      'Lease Lost',
      'This request took longer than its lease and another attempt with the same Idempotency-Key took over; its work was rolled back. Retry with the same key to get the result.',
      { 'Retry-After': '1' },
    ),
};

/** Thrown by the fenced completion when the key is no longer ours: roll back. */
export class LeaseLostError extends Error {
  override name = 'LeaseLostError';
  constructor() {
    super('the idempotency key was taken over by another attempt; the completion matched no row');
  }
}
