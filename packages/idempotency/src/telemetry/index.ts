/** `safe-retries/telemetry`: the events the module publishes on its diagnostics channel. */
export { IDEMPOTENCY_EVENTS_CHANNEL } from './idempotency.telemetry';
export type { IdempotencyEvent } from './idempotency.telemetry';
