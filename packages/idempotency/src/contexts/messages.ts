/** `safe-retries/messages`: message handlers' errors, and the idempotent consumer of redelivered messages. */
export { CONTEXT_ERROR_CODES, IdempotencyMessageError, REPLAYED_OUTCOME_CODE } from './context-errors';
export type { ContextErrorCode, ContextErrorDetails } from './context-errors';
export { IdempotentConsumer, InvalidMessageIdError } from '../consumer/idempotent-consumer';
export type { ConsumedMessage } from '../consumer/idempotent-consumer';
