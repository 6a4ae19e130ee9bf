// The simulator's public face: the app (or a test) starts it in its own process
// with startCardNetworkSimulator; main.ts runs the same thing as a separate process.
export { STRIPE_CURRENCIES, STRIPE_MINIMUM_CHARGE } from './currencies';
export type { LostAnswerFault, SimulatorFault } from './faults';
export { PAYMENT_INTENT_STATUSES, REFUND_STATUSES } from './resources';
export type { PaymentIntentStatus, RefundStatus } from './resources';
export { maskSecret } from './router';
export { startCardNetworkSimulator } from './simulator';
export type { RunningSimulator, SimulatorOptions } from './simulator';
export { DEFAULT_RETRY_SCHEDULE_MS, EVENT_API_VERSION, EVENT_TYPES, WEBHOOK_FAULTS, webhookSignature } from './webhooks';
export type { SimulatorEvent, SimulatorEventType, WebhookFault, WebhookOptions, WebhookStats, WebhookTarget } from './webhooks';
