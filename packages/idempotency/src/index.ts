/*
 * The library's public surface: what an app writes against. Everything else
 * (the store and its token, the replay cache, key hashing) is internal; tests
 * reach it by path.
 */
export { IDEMPOTENCY_ASYNC_OPTIONS_TYPE, IDEMPOTENCY_OPTIONS_TYPE, IdempotencyModule } from './idempotency.module';
export { transactionalClsModule } from './transactional-cls';
export { IDEMPOTENCY_DEFAULTS, IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from './idempotency.options';
export { IdempotencyModuleOptions, IdempotencyRequest, IdempotencyStoreKind, IdempotentOptions } from './module-options';
export type { IdempotencyRedisClient, IdempotencyRedisOptions } from './redis/redis-options';
export { Duration, formatDuration, parseDuration } from './duration';
export { parseKeyRing } from './response-cipher';
export { Idempotent } from './idempotent.decorator';
export { Operation, PhasedOperation } from './phased-operation';
export { IdempotencyRecovery, ResumeFunction } from './idempotency-recovery.service';
export { IDEMPOTENT_OUTCOME, IdempotentOutcome, OutcomeResponse, isIdempotentOutcome } from './idempotent-outcome';
export { IdempotencyContext } from './idempotency.context';
export { IdempotencyKeys } from './idempotency-keys.service';
export { IDEMPOTENCY_EVENTS_CHANNEL, IdempotencyEvent, IdempotencyEventName } from './idempotency.telemetry';
export type { KeyOutcome } from './idempotency.store';
export { HttpResponse } from './http-response';
export { ConsumedMessage, IdempotentConsumer, InvalidMessageIdError, MAX_MESSAGE_ID_LENGTH } from './idempotent-consumer';
export { IdempotencyPurgeService, PurgeResult } from './idempotency-purge.service';
export { IdempotencyMigration, createIdempotencyMigrations, idempotencyMigrations } from './migrations';
export { IdempotencyKeyEntity, IdempotencyKeyRow, idempotencyKeyEntity } from './idempotency-key.entity';
export { applyIdempotencyPolicy, policyMarkdown } from './idempotency.policy';
export { IdempotencyErrorCode, IdempotencyProblem, IdempotencyProblemBody, LeaseLostError } from './idempotency.errors';
