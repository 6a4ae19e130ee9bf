/**
 * The events a client can subscribe to: each one a state a payment, refund or
 * order reaches and keeps. A payment or refund between its phases
 * (`processing`) has no event: it may still be released without a trace
 * (nothing charged), and its next state is announced when it is reached.
 */
export const EVENT_TYPES = [
  'order.created',
  'order.canceled',
  'order.paid',
  'payment.succeeded',
  'payment.failed',
  'payment.requires_attention',
  'refund.pending',
  'refund.succeeded',
  'refund.failed',
  'refund.requires_attention',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** An endpoint subscribed to every type, present and future. */
export const ALL_EVENTS = '*';
