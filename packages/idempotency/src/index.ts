/*
 * The library's root entry: what an app writes against. The rest sits behind
 * subpaths by concern: `safe-retries/outbox`, `/migrations`, `/messages`,
 * `/graphql`, `/telemetry`, `/redis`, `/nats`, `/swagger` (the only part that
 * loads @nestjs/swagger) and `/testing` (the store contract's test kit).
 */
// The module and its options.
export { IdempotencyModule } from './module/idempotency.module';
export type { IdempotencyModuleOptions, IdempotentOptions } from './config/module-options';
export { IDEMPOTENCY_DEFAULTS } from './config/idempotency.options';
export { formatDuration, parseDuration } from './config/duration';
export { parseKeyRing } from './contract/response-cipher';
export { transactionalClsModule } from './config/transactional-cls';
// Routes: the decorator, responses, phases, outcomes.
export { Idempotent } from './module/idempotent.decorator';
export { HttpResponse } from './http/http-response';
export { Operation, PhasedOperation } from './core/phased-operation';
export { phasedOperation } from './core/phased-operation-name';
export type { PhasedOperationName } from './core/phased-operation-name';
export { Resumes } from './recovery/resumes.decorator';
export { IDEMPOTENT_OUTCOME } from './contract/idempotent-outcome';
export type { IdempotentOutcome, OutcomeResponse } from './contract/idempotent-outcome';
// What an app injects.
export { IdempotencyContext } from './core/idempotency.context';
export { IdempotencyKeys } from './module/idempotency-keys.service';
export { IdempotencyRecovery } from './recovery/idempotency-recovery.service';
export { IdempotencyPurgeService } from './purge/idempotency-purge.service';
// What an app catches or tells its clients.
export { IdempotencyErrorCode, IdempotencyProblem, LeaseLostError } from './contract/idempotency.errors';
