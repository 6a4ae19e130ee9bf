/**
 * Sends the events: one endpoint for all accounts, the retry policy, and every
 * timer and socket of delivery, so that close() stops them all at once. What
 * an account pauses, queues and holds back is its WebhookChannel (webhooks.ts).
 */
import { Agent as HttpAgent, ClientRequest, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import {
  DEFAULT_RETRY_SCHEDULE_MS,
  PendingWebhookFault,
  SimulatorEvent,
  WebhookChannel,
  WebhookOptions,
  webhookSignature,
  WebhookTarget,
} from './webhooks';

const DEFAULT_MAX_ATTEMPTS = 12;
const DEFAULT_TIMEOUT_MS = 10_000;
/** How long `out_of_order` holds an event back when no other event follows it. */
export const OUT_OF_ORDER_FALLBACK_MS = 2_000;
const USER_AGENT = 'Stripe/1.0 (+https://stripe.com/docs/webhooks)';

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
