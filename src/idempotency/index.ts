export { IdempotencyModule } from './idempotency.module';
export { Idempotent } from './idempotent.decorator';
export { IdempotencyModuleOptions, IdempotentOptions, IDEMPOTENCY_OPTIONS } from './idempotency.options';
export { IDEMPOTENT_OUTCOME, IdempotentOutcome, OutcomeResponse, isIdempotentOutcome } from './idempotent-outcome';
export { IDEMPOTENCY_STORE, IdempotencyStore } from './idempotency.store';
export { applyIdempotencyPolicy, policyMarkdown } from './idempotency.policy';
export { IdempotencyContext } from './idempotency.context';
export { IdempotencyPurgeService } from './idempotency-purge.service';
