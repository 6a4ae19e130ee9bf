/**
 * The events a client can subscribe to: each one a state a payment, refund or
 * order reaches and keeps. A payment or refund between its phases
 * (`processing`) has no event: it may still be released without a trace
 * (nothing charged), and its next state is announced when it is reached.
 * `*.contradicted`: the card network contradicts the record's final state (a
 * charge for a payment held failed); the record is unchanged and a person
 * looks at it.
 */
export const EVENT_TYPES = [
  'order.created',
  'order.canceled',
  'order.paid',
  'payment.succeeded',
  'payment.failed',
  'payment.requires_attention',
  'payment.contradicted',
  'refund.pending',
  'refund.succeeded',
  'refund.failed',
  'refund.requires_attention',
  'refund.contradicted',
  'webhook_endpoint.disabled',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** An endpoint subscribed to every type, present and future. */
export const ALL_EVENTS = '*';
