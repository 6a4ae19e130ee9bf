/*
 * The library's root entry: what an app writes against. The Redis store
 * (`safe-retries/redis`), the OpenAPI policy (`safe-retries/swagger`, the only
 * part that loads @nestjs/swagger) and the store contract's test kit
 * (`safe-retries/testing`) sit behind subpaths; everything else is internal.
 */
// The module, its options, and the values an app's configuration reads.
export { IdempotencyModule } from './idempotency.module';
export { IDEMPOTENCY_COMMIT_MODES } from './module-options';
export type { IdempotencyCommitMode, IdempotencyKeySource, IdempotencyModuleOptions, IdempotentOptions } from './module-options';
export { IDEMPOTENCY_DEFAULTS } from './idempotency.options';
export { formatDuration, parseDuration } from './duration';
export type { Duration } from './duration';
export { parseKeyRing } from './response-cipher';
export { transactionalClsModule } from './transactional-cls';
// Routes: the decorator, responses, phases.
export { Idempotent } from './idempotent.decorator';
export { HttpResponse } from './http-response';
export { Operation, PhasedOperation } from './phased-operation';
export { phasedOperation } from './phased-operation-name';
export type { PhasedOperationName } from './phased-operation-name';
export { Resumes } from './resumes.decorator';
export type { ResumesDecorator } from './resumes.decorator';
export type { TakeOverResult } from './idempotency-recovery.service';
export { IDEMPOTENT_OUTCOME } from './idempotent-outcome';
export type { IdempotentOutcome, OutcomeResponse } from './idempotent-outcome';
// What an app injects.
export { IdempotencyContext } from './idempotency.context';
export { IdempotencyKeys } from './idempotency-keys.service';
export { IdempotencyRecovery } from './idempotency-recovery.service';
export { IdempotentConsumer, InvalidMessageIdError } from './idempotent-consumer';
export { IdempotencyPurgeService } from './idempotency-purge.service';
export { Outbox, OutboxOutsideTransactionError } from './outbox/outbox';
export type { OutboxEntry } from './outbox/outbox';
export type { DeadLetter, OutboxMessage, OutboxPublisher } from './outbox/outbox-message';
// What an app catches or tells its clients.
export { IdempotencyErrorCode, IdempotencyProblem, LeaseLostError } from './idempotency.errors';
export { CONTEXT_ERROR_CODES, IdempotencyGraphQLError, IdempotencyMessageError, REPLAYED_OUTCOME_CODE } from './contexts/context-errors';
export type { ContextErrorCode, ContextErrorDetails } from './contexts/context-errors';
export { IDEMPOTENCY_EVENTS_CHANNEL } from './idempotency.telemetry';
export type { IdempotencyEvent } from './idempotency.telemetry';
// The tables.
export { createIdempotencyMigrations, idempotencyMigrations } from './migrations';
export type { IdempotencyMigration } from './migrations';
export { IdempotencyKeyEntity, idempotencyKeyEntity } from './idempotency-key.entity';
