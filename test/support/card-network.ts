import { ChildProcess, spawn } from 'node:child_process';
import { DEFAULT_CARD_NETWORK_SECRET } from '../../src/config/config';
import { CARD_NETWORK_ENDPOINT, CardNetworkEndpoint } from '../../src/payments/card-network/card-network.module';
import type { DataSource } from 'typeorm';
import type { TestApp } from './app';
import { builtPackageFile } from './dist';
import { waitFor } from './http-client';

/**
 * The card network as the suites see it: its ledger, read through its own
 * Stripe-shaped API (what was charged, whatever our tables say), its fault
 * controls, and the simulator as a process of its own, so that its ledger
 * outlives an app that is killed.
 */

export interface PaymentIntent {
  id: string;
  status: string;
  amount: number;
  currency: string;
  description: string | null;
  metadata: Record<string, string>;
}

export interface NetworkEvent {
  id: string;
  type: string;
  created: number;
  data: { object: { id: string; object: string; status: string; metadata: Record<string, string> } & Record<string, unknown> };
}

export interface Refund {
  id: string;
  amount: number;
  payment_intent: string;
  status: 'pending' | 'succeeded' | 'failed' | 'canceled';
  metadata: Record<string, string>;
}

export class Ledger {
  constructor(
    readonly url: string,
    private readonly secret = DEFAULT_CARD_NETWORK_SECRET,
  ) {}

  /** The ledger of an app that runs the simulator inside its process. */
  static of(t: TestApp): Ledger {
    return new Ledger(t.app.get<CardNetworkEndpoint>(CARD_NETWORK_ENDPOINT).url, t.config.cardNetwork.apiKey);
  }

  private async call<T>(method: string, path: string, body?: Record<string, string | number>): Promise<T> {
    const res = await fetch(`${this.url}${path}`, {
      method,
      headers: { Authorization: `Bearer ${this.secret}`, ...(body ? { 'Content-Type': 'application/x-www-form-urlencoded' } : {}) },
      body: body ? new URLSearchParams(Object.entries(body).map(([k, v]) => [k, String(v)])).toString() : undefined,
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  private async all<T extends { id: string }>(path: string): Promise<T[]> {
    const items: T[] = [];
    let after: string | undefined;
    const join = path.includes('?') ? '&' : '?';
    for (;;) {
      const page = await this.call<{ data: T[]; has_more: boolean }>('GET', `${path}${join}limit=100${after ? `&starting_after=${after}` : ''}`);
      items.push(...page.data);
      if (!page.has_more || page.data.length === 0) return items;
      after = page.data[page.data.length - 1].id;
    }
  }

  /** Every PaymentIntent, newest first. */
  intents(): Promise<PaymentIntent[]> {
    return this.all<PaymentIntent>('/v1/payment_intents');
  }

  /** The succeeded charges, optionally only those whose metadata has `key=value`. */
  async charges(filter?: { key: string; value: string }): Promise<PaymentIntent[]> {
    return (await this.intents()).filter((i) => i.status === 'succeeded' && (!filter || i.metadata[filter.key] === filter.value));
  }

  /** The succeeded charges with this description. */
  async chargesDescribed(description: string): Promise<PaymentIntent[]> {
    return (await this.intents()).filter((i) => i.status === 'succeeded' && i.description === description);
  }

  refunds(paymentIntent?: string): Promise<Refund[]> {
    return this.all<Refund>(paymentIntent ? `/v1/refunds?payment_intent=${paymentIntent}` : '/v1/refunds');
  }

  refund(id: string): Promise<Refund> {
    return this.call<Refund>('GET', `/v1/refunds/${id}`);
  }

  /** A card token, as Stripe.js makes one from a test card number (`tok_1…`). */
  async token(cardNumber: string): Promise<string> {
    const year = new Date().getUTCFullYear() + 2;
    const made = await this.call<{ id: string }>('POST', '/v1/tokens', {
      'card[number]': cardNumber,
      'card[exp_month]': 12,
      'card[exp_year]': year,
      'card[cvc]': '123',
    });
    return made.id;
  }

  /**
   * The next `times` executed POSTs lose their answer (drop), never get one (hang), or get a 500
   * (error); `saved_error`: the next `times` keyed POSTs do nothing and a 500 is saved under their
   * key for the key window, as Stripe does.
   */
  fault(fault: 'drop' | 'hang' | 'error' | 'saved_error', times: number): Promise<void> {
    return this.call('POST', '/_simulator/faults', { fault, times });
  }

  clearFaults(): Promise<void> {
    return this.call('DELETE', '/_simulator/faults');
  }

  /** Requests are accepted but not executed until release(); one whose caller leaves is discarded. */
  hold(): Promise<void> {
    return this.call('POST', '/_simulator/hold');
  }

  release(): Promise<void> {
    return this.call('POST', '/_simulator/release');
  }

  /**
   * The held requests' callers have left (their answers came back 503): waits
   * until the network has seen each leave and discarded it, then stops holding.
   * A caller's leaving and the test's release reach the network on different
   * connections, in no set order.
   */
  async releaseLost(): Promise<void> {
    await waitFor('the held requests to be discarded', async () => (await this.held()) === 0);
    await this.release();
  }

  /**
   * The next `times` requests to /v1/* (after `after` that pass) are refused
   * before anything is done: 400 invalid_request_error, 401 or 429.
   */
  refuse(status: 400 | 401 | 429, times = 1, after = 0, param?: string): Promise<void> {
    return this.call('POST', '/_simulator/refusals', { status, times, after, ...(param ? { param } : {}) });
  }

  /** Every event the network emitted, newest first. */
  events(type?: string): Promise<NetworkEvent[]> {
    return this.all<NetworkEvent>(type ? `/v1/events?type=${type}` : '/v1/events');
  }

  /** Events are kept, not delivered, until resumeWebhooks(). */
  pauseWebhooks(): Promise<void> {
    return this.call('POST', '/_simulator/webhooks/pause');
  }

  async held(): Promise<number> {
    return (await this.call<{ held: number }>('GET', '/_simulator/stats')).held;
  }
}

/**
 * The app's environment against a card network process: one send per call (no
 * SDK resends), a 400 ms timeout, and no recovery job (a suite runs it itself).
 */
export function networkAppEnv(network: { url: string }): Record<string, string> {
  return { CARD_NETWORK_URL: network.url, CARD_NETWORK_MAX_RETRIES: '0', CARD_NETWORK_TIMEOUT: '400ms', IDEMPOTENCY_JOBS: 'off' };
}

/** The payments recorded with this description. */
export function paymentsDescribed(dataSource: DataSource, description: string) {
  return dataSource.query<{ id: string; status: string; network_charge_id: string | null }[]>(
    'SELECT id, status, network_charge_id FROM payments WHERE description = $1',
    [description],
  );
}

/**
 * One operation reconciled at both ends: one succeeded payment recorded with
 * this description, one succeeded intent at the network with it, and they
 * name each other. Answers the payment's id.
 */
export async function reconcilePayment(dataSource: DataSource, ledger: Ledger, description: string): Promise<string> {
  const payments = await paymentsDescribed(dataSource, description);
  const charges = await ledger.chargesDescribed(description);
  expect(payments.map((p) => p.status)).toEqual(['succeeded']);
  expect(charges.map((c) => [c.id, c.metadata.payment_id])).toEqual([[payments[0].network_charge_id, payments[0].id]]);
  return payments[0].id;
}

export interface CardNetworkProcess {
  url: string;
  ledger: Ledger;
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** `npm run card-network`'s built entry (the simulator workspace's main.js) as its own process, ready when it prints its address. */
export async function startCardNetworkProcess(options: { delay?: string; env?: Record<string, string> } = {}): Promise<CardNetworkProcess> {
  const child = spawn(process.execPath, [builtPackageFile('card-network-simulator', 'main.js')], {
    env: {
      PATH: process.env.PATH ?? '',
      // The OS picks the port and the simulator prints it (no race with other suites).
      CARD_NETWORK_PORT: '0',
      CARD_NETWORK_SECRET: DEFAULT_CARD_NETWORK_SECRET,
      CARD_NETWORK_DELAY: options.delay ?? '0ms',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  let output = '';
  const exited = new Promise<void>((done) => child.once('exit', () => (live.delete(child), done())));
  const url = await new Promise<string>((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`the card network did not start:\n${output}`)), 15_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const listening = /listening on (http:\/\/[^\s]+)/.exec(output);
      if (listening) {
        clearTimeout(timer);
        ready(listening[1]);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`the card network exited with ${code}:\n${output}`));
    });
  });
  return {
    url,
    ledger: new Ledger(url),
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}
