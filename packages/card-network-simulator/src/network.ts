/**
 * The running card network: its accounts (one per secret key), its settings,
 * the timers of every later change (a delayed answer, a processing intent that
 * succeeds, a refund that settles), and its events with their delivery.
 */
import { randomBytes } from 'node:crypto';
import { Account, Cause, newAccount } from './account';
import { randomId, unixSeconds } from './api';
import type { PaymentIntent, Refund } from './resources';
import { WebhookDispatcher } from './webhook-dispatcher';
import { EVENT_API_VERSION, SimulatorEvent, SimulatorEventType, WebhookOptions } from './webhooks';

export interface NetworkSettings {
  /** Latency: the answer goes out this long after the request arrived. */
  delayMs: number;
  /** How long a saved Idempotency-Key result is kept. */
  ttlMs: number;
  /** How long a `processing` intent takes to succeed, and a late refund to settle. */
  processingMs: number;
}

export class Network {
  readonly webhooks: WebhookDispatcher;
  /** Keys the Idempotency-Key fingerprints, so that no parameter (a card number) is kept as sent. */
  readonly fingerprintKey = randomBytes(32);
  readonly accounts: Map<string, Account>;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly sweeper: NodeJS.Timeout;
  private isClosed = false;

  constructor(
    readonly settings: NetworkSettings,
    secrets: readonly string[],
    webhook: WebhookOptions | undefined,
  ) {
    this.webhooks = new WebhookDispatcher(webhook);
    this.accounts = new Map(secrets.map((secret) => [secret, newAccount()] as const));
    // Memory stays bounded: expired keys are dropped even if nobody asks for them again.
    this.sweeper = setInterval(() => this.dropExpiredKeys(), Math.min(Math.max(settings.ttlMs, 1_000), 60_000));
    this.sweeper.unref();
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Runs `run` in `ms`, unless the network closes first. */
  later(ms: number, run: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      run();
    }, ms);
    this.timers.add(timer);
  }

  /** Records the event with a copy of the object as it is now, and hands it to webhook delivery. */
  emit(cause: Cause, type: SimulatorEventType, object: PaymentIntent | Refund): void {
    const event: SimulatorEvent = {
      id: randomId('evt_', 24),
      object: 'event',
      api_version: EVENT_API_VERSION,
      created: unixSeconds(),
      livemode: false,
      pending_webhooks: 0,
      type,
      data: { object: structuredClone(object) },
      request: cause.request,
    };
    cause.account.events.set(event.id, event);
    this.webhooks.publish(cause.account.webhooks, event);
  }

  /** Stops every timer and delivery, and forgets the held requests; answers still due are never sent. */
  close(): void {
    this.isClosed = true;
    clearInterval(this.sweeper);
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.webhooks.close();
    for (const account of this.accounts.values()) account.held.clear();
  }

  private dropExpiredKeys(): void {
    const now = performance.now();
    for (const account of this.accounts.values()) {
      for (const [key, entry] of account.keys) {
        if (entry.state === 'done' && entry.expiresAt <= now) account.keys.delete(key);
      }
    }
  }
}
