/**
 * Webhook delivery as Stripe does it, on a compressed clock: each event is POSTed
 * as JSON to one endpoint, signed with `Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256
 * of "t.payload">` (what `stripe.webhooks.constructEvent` verifies), and retried with
 * backoff until the endpoint answers 2xx or the attempts run out. Each attempt is
 * signed afresh, so a late retry never fails the receiver's timestamp tolerance.
 *
 * Every delivery runs on its own timers: a failing event never holds back the
 * events after it (Stripe gives no ordering guarantee either). The per-account
 * faults (duplicate, out_of_order, late) and pause exist so a receiver can prove
 * it copes with what Stripe is allowed to do: send twice, out of order, late.
 *
 * This file holds the shapes, the signature and an account's side of delivery;
 * webhook-dispatcher.ts sends.
 */
import { createHmac } from 'node:crypto';

/** The API version the installed `stripe` SDK pins; events carry it as Stripe's would. */
export const EVENT_API_VERSION = '2026-10-28.endive';

export const EVENT_TYPES = [
  'payment_intent.succeeded',
  'payment_intent.payment_failed',
  'payment_intent.processing',
  'payment_intent.canceled',
  'payment_intent.requires_action',
  'refund.created',
  'refund.updated',
  'refund.failed',
] as const;
export type SimulatorEventType = (typeof EVENT_TYPES)[number];

/** Stripe's Event object. `data.object` is the object as a GET would have answered when it happened. */
export interface SimulatorEvent {
  id: string;
  object: 'event';
  api_version: string;
  created: number;
  livemode: false;
  /** 1 while a delivery to the endpoint is outstanding, 0 once one succeeded (or with no endpoint). */
  pending_webhooks: number;
  type: SimulatorEventType;
  data: { object: unknown };
  /** The API request that caused it; both null for a change the network made by itself. */
  request: { id: string | null; idempotency_key: string | null };
}

export interface WebhookTarget {
  /** http(s) URL the events are POSTed to. */
  url: string;
  /** The endpoint's signing secret (`whsec_...`), as `constructEvent` is given it. */
  secret: string;
}

export interface WebhookOptions extends WebhookTarget {
  /** Wait before retry n (the last value repeats); default 1 s, 2 s, 4 s, ... 32 s, then 60 s. */
  retryScheduleMs?: number[];
  /** Attempts per delivery, the first included; default 12. */
  maxAttempts?: number;
  /** An attempt with no answer within this long has failed; default 10 s. */
  timeoutMs?: number;
}

export const WEBHOOK_FAULTS = ['duplicate', 'out_of_order', 'late'] as const;
export type WebhookFault = (typeof WEBHOOK_FAULTS)[number];

/** One queued fault; each applies to one event. */
export type PendingWebhookFault =
  | { fault: 'duplicate'; copies: number }
  | { fault: 'out_of_order' }
  | { fault: 'late'; delayMs: number };

export interface WebhookStats {
  paused: boolean;
  /** Deliveries not finished: in flight, waiting for a retry, delayed by `late`, or held back by `out_of_order`. */
  pending: number;
  /** Events kept while paused, not yet handed to delivery. */
  queued: number;
  delivered: number;
  failed_attempts: number;
  /** Deliveries that ran out of attempts. */
  abandoned: number;
  pending_faults: number;
}

export const DEFAULT_RETRY_SCHEDULE_MS = [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000];

/** Stripe's scheme: v1 is the hex HMAC-SHA256, keyed by the endpoint secret, of `${t}.${payload}`. */
export function webhookSignature(secret: string, payload: string, timestamp: number): string {
  const v1 = createHmac('sha256', secret).update(`${timestamp}.${payload}`, 'utf8').digest('hex');
  return `t=${timestamp},v1=${v1}`;
}

/** One account's side of delivery: what is paused, queued, held back and counted. */
export class WebhookChannel {
  faults: PendingWebhookFault[] = [];
  paused = false;
  queued: SimulatorEvent[] = [];
  heldBack: { event: SimulatorEvent; timer: NodeJS.Timeout } | undefined;
  pending = 0;
  delivered = 0;
  failedAttempts = 0;
  abandoned = 0;

  stats(): WebhookStats {
    return {
      paused: this.paused,
      pending: this.pending + (this.heldBack ? 1 : 0),
      queued: this.queued.length,
      delivered: this.delivered,
      failed_attempts: this.failedAttempts,
      abandoned: this.abandoned,
      pending_faults: this.faults.length,
    };
  }
}
