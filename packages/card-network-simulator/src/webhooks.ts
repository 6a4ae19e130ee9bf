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
 */
import { createHmac } from 'node:crypto';
import { Agent as HttpAgent, ClientRequest, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

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
const DEFAULT_MAX_ATTEMPTS = 12;
const DEFAULT_TIMEOUT_MS = 10_000;
/** How long `out_of_order` holds an event back when no other event follows it. */
export const OUT_OF_ORDER_FALLBACK_MS = 2_000;
const USER_AGENT = 'Stripe/1.0 (+https://stripe.com/docs/webhooks)';

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

function checkTarget(target: WebhookTarget): WebhookTarget {
  let url: URL;
  try {
    url = new URL(target.url);
  } catch {
    throw new RangeError(`webhook url is not a URL: ${target.url}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new RangeError('webhook url must be http or https');
  if (target.secret.length === 0) throw new RangeError('webhook secret must not be empty');
  return { url: target.url, secret: target.secret };
}

/** The endpoint, the retry policy and every timer and socket of delivery, for all accounts. */
export class WebhookDispatcher {
  private target: WebhookTarget | null;
  private readonly schedule: number[];
  private readonly maxAttempts: number;
  private readonly timeoutMs: number;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly requests = new Set<ClientRequest>();
  // No keep-alive: a receiver that is closed between tests must not find our idle sockets.
  private readonly httpAgent = new HttpAgent({ keepAlive: false });
  private readonly httpsAgent = new HttpsAgent({ keepAlive: false });
  private closed = false;

  constructor(options: WebhookOptions | undefined) {
    this.schedule = options?.retryScheduleMs ?? DEFAULT_RETRY_SCHEDULE_MS;
    this.maxAttempts = options?.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
    this.timeoutMs = options?.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (this.schedule.length === 0 || this.schedule.some((ms) => !Number.isFinite(ms) || ms < 0)) {
      throw new RangeError('webhook retryScheduleMs must be a non-empty list of non-negative numbers');
    }
    if (!Number.isSafeInteger(this.maxAttempts) || this.maxAttempts < 1) throw new RangeError('webhook maxAttempts must be an integer of at least 1');
    if (!Number.isFinite(this.timeoutMs) || this.timeoutMs <= 0) throw new RangeError('webhook timeoutMs must be a positive number');
    this.target = options ? checkTarget(options) : null;
  }

  /** A new endpoint applies to the next attempt of every delivery; null stops delivering (events are still listed). */
  setTarget(target: WebhookTarget | null): void {
    this.target = target ? checkTarget(target) : null;
  }

  /** An event happened: deliver it now, or as the account's pause and faults say. */
  publish(channel: WebhookChannel, event: SimulatorEvent): void {
    if (this.closed || !this.target) return;
    event.pending_webhooks = 1;
    if (channel.paused) channel.queued.push(event);
    else this.route(channel, event);
  }

  addFault(channel: WebhookChannel, fault: PendingWebhookFault, times: number): void {
    for (let i = 0; i < times; i++) channel.faults.push(fault);
  }

  clearFaults(channel: WebhookChannel): void {
    channel.faults = [];
  }

  pause(channel: WebhookChannel): void {
    channel.paused = true;
  }

  /** Hands the queued events to delivery in the order they happened, each with its fault if one is queued. */
  resume(channel: WebhookChannel): number {
    channel.paused = false;
    const queued = channel.queued;
    channel.queued = [];
    for (const event of queued) this.route(channel, event);
    return queued.length;
  }

  close(): void {
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    for (const req of this.requests) req.destroy();
    this.requests.clear();
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  private after(ms: number, run: () => void): NodeJS.Timeout {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      run();
    }, ms);
    this.timers.add(timer);
    return timer;
  }

  private cancel(timer: NodeJS.Timeout): void {
    clearTimeout(timer);
    this.timers.delete(timer);
  }

  /**
   * Applies the next fault to this event. An event held back by `out_of_order` goes
   * out once the event after it has had its first attempt, so the receiver sees
   * the later one first.
   */
  private route(channel: WebhookChannel, event: SimulatorEvent): void {
    const held = channel.heldBack;
    channel.heldBack = undefined;
    if (held) this.cancel(held.timer);
    const fault = channel.faults.shift();
    let firstAttempt: Promise<unknown>;
    switch (fault?.fault) {
      case 'out_of_order':
        channel.heldBack = { event, timer: this.after(OUT_OF_ORDER_FALLBACK_MS, () => this.releaseHeld(channel)) };
        firstAttempt = Promise.resolve();
        break;
      case 'late':
        firstAttempt = this.deliver(channel, event, fault.delayMs);
        break;
      case 'duplicate':
        firstAttempt = Promise.all(Array.from({ length: fault.copies }, () => this.deliver(channel, event, 0)));
        break;
      case undefined:
        firstAttempt = this.deliver(channel, event, 0);
        break;
    }
    if (held) void firstAttempt.then(() => this.deliver(channel, held.event, 0));
  }

  /** Nothing followed the held-back event in time: it goes out on its own (or waits for resume). */
  private releaseHeld(channel: WebhookChannel): void {
    const held = channel.heldBack;
    channel.heldBack = undefined;
    if (!held) return;
    if (channel.paused) channel.queued.unshift(held.event);
    else void this.deliver(channel, held.event, 0);
  }

  /** One delivery with its retries; resolves when its first attempt has an outcome. */
  private deliver(channel: WebhookChannel, event: SimulatorEvent, delayMs: number): Promise<void> {
    if (this.closed) return Promise.resolve();
    channel.pending++;
    return new Promise<void>((firstDone) => {
      const attempt = (n: number): void => {
        const target = this.target;
        if (!target) {
          channel.pending--;
          return firstDone();
        }
        void this.post(target, event).then((ok) => {
          firstDone();
          if (this.closed) return;
          if (ok) {
            channel.delivered++;
            channel.pending--;
            event.pending_webhooks = 0;
            return;
          }
          channel.failedAttempts++;
          if (n >= this.maxAttempts) {
            channel.abandoned++;
            channel.pending--;
            return;
          }
          this.after(this.schedule[Math.min(n - 1, this.schedule.length - 1)], () => attempt(n + 1));
        });
      };
      if (delayMs > 0) this.after(delayMs, () => attempt(1));
      else attempt(1);
    });
  }

  /** One signed POST; true on any 2xx, false on any other status, a socket error or no answer in time. */
  private post(target: WebhookTarget, event: SimulatorEvent): Promise<boolean> {
    const payload = JSON.stringify(event);
    const signature = webhookSignature(target.secret, payload, Math.floor(Date.now() / 1000));
    const url = new URL(target.url);
    const https = url.protocol === 'https:';
    return new Promise<boolean>((resolveAttempt) => {
      let settled = false;
      const settle = (ok: boolean) => {
        if (settled) return;
        settled = true;
        this.cancel(timeout);
        this.requests.delete(req);
        resolveAttempt(ok);
      };
      const req = (https ? httpsRequest : httpRequest)(
        url,
        {
          method: 'POST',
          agent: https ? this.httpsAgent : this.httpAgent,
          headers: {
            'Content-Type': 'application/json; charset=utf-8',
            'Content-Length': Buffer.byteLength(payload),
            'User-Agent': USER_AGENT,
            Accept: '*/*; q=0.5, application/xml',
            'Cache-Control': 'no-cache',
            'Stripe-Signature': signature,
          },
        },
        (res) => {
          res.resume();
          const status = res.statusCode ?? 0;
          settle(status >= 200 && status < 300);
        },
      );
      const timeout = this.after(this.timeoutMs, () => {
        req.destroy(new Error(`no answer within ${this.timeoutMs} ms`));
        settle(false);
      });
      this.requests.add(req);
      req.on('error', () => settle(false));
      req.end(payload);
    });
  }
}
