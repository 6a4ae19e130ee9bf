/*
 * The library's root entry: what an app writes against. The Redis store
 * (`safe-retries/redis`), the OpenAPI policy (`safe-retries/swagger`, the only
 * part that loads @nestjs/swagger) and the store contract's test kit
 * (`safe-retries/testing`) sit behind subpaths; everything else is internal.
 */
// The module, its options, and the values an app's configuration reads.
export { IdempotencyModule } from './module/idempotency.module';
export { IDEMPOTENCY_COMMIT_MODES } from './config/module-options';
export type { IdempotencyCommitMode, IdempotencyKeySource, IdempotencyModuleOptions, IdempotentOptions } from './config/module-options';
export { IDEMPOTENCY_DEFAULTS } from './config/idempotency.options';
export { formatDuration, parseDuration } from './config/duration';
export type { Duration } from './config/duration';
export { parseKeyRing } from './contract/response-cipher';
export { transactionalClsModule } from './config/transactional-cls';
// Routes: the decorator, responses, phases.
export { Idempotent } from './module/idempotent.decorator';
export { HttpResponse } from './http/http-response';
export { Operation, PhasedOperation } from './core/phased-operation';
export { phasedOperation } from './core/phased-operation-name';
export type { PhasedOperationName } from './core/phased-operation-name';
export { Resumes } from './recovery/resumes.decorator';
export type { ResumesDecorator } from './recovery/resumes.decorator';
export type { TakeOverResult } from './recovery/idempotency-recovery.service';
export { IDEMPOTENT_OUTCOME } from './contract/idempotent-outcome';
export type { IdempotentOutcome, OutcomeResponse } from './contract/idempotent-outcome';
// What an app injects.
export { IdempotencyContext } from './core/idempotency.context';
export { IdempotencyKeys } from './module/idempotency-keys.service';
export { IdempotencyRecovery } from './recovery/idempotency-recovery.service';
export { IdempotentConsumer, InvalidMessageIdError } from './consumer/idempotent-consumer';
export { IdempotencyPurgeService } from './purge/idempotency-purge.service';
export { Outbox, OutboxOutsideTransactionError } from './outbox/outbox';
export type { OutboxEntry } from './outbox/outbox';
export type { DeadLetter, OutboxMessage, OutboxPublisher } from './contract/outbox-message';
// What an app catches or tells its clients.
export { IdempotencyErrorCode, IdempotencyProblem, LeaseLostError } from './contract/idempotency.errors';
export { CONTEXT_ERROR_CODES, IdempotencyGraphQLError, IdempotencyMessageError, REPLAYED_OUTCOME_CODE } from './contexts/context-errors';
export type { ContextErrorCode, ContextErrorDetails } from './contexts/context-errors';
export { IDEMPOTENCY_EVENTS_CHANNEL } from './telemetry/idempotency.telemetry';
export type { IdempotencyEvent } from './telemetry/idempotency.telemetry';
// The tables.
export { createIdempotencyMigrations, idempotencyMigrations } from './migrations';
export type { IdempotencyMigration } from './migrations';
export { IdempotencyKeyEntity, idempotencyKeyEntity } from './stores/postgres/idempotency-key.entity';
