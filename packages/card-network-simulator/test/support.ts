import { createServer, IncomingHttpHeaders, request } from 'node:http';
import { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import { RunningSimulator, SimulatorOptions, startCardNetworkSimulator } from '../src';

/**
 * Raw HTTP for the simulator suites: one request per TCP connection
 * (`agent: false`), so a dropped or hung answer is seen exactly as a client
 * would see it and aborting a request closes its socket.
 */
export const SECRET = 'sk_test_simulator_0123456789abcdef';
export const OTHER_SECRET = 'sk_test_other_account_fedcba9876543210';

export interface SimResponse {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  json<T = Record<string, unknown>>(): T;
}

export interface SimRequest {
  method?: string;
  path: string;
  /** undefined: the default secret; null: no Authorization header. */
  secret?: string | null;
  authorization?: string;
  key?: string;
  form?: Record<string, string | number | boolean> | [string, string][];
  json?: unknown;
  /** Rejects and destroys the socket when no full answer arrived in time. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export function encodeForm(form: NonNullable<SimRequest['form']>): string {
  const pairs = Array.isArray(form) ? form : Object.entries(form).map(([k, v]) => [k, String(v)] as [string, string]);
  return new URLSearchParams(pairs).toString();
}

export function call(baseUrl: string, options: SimRequest): Promise<SimResponse> {
  const url = new URL(options.path, baseUrl);
  const headers: Record<string, string> = { Connection: 'close' };
  const secret = options.secret === undefined ? SECRET : options.secret;
  if (options.authorization) headers.Authorization = options.authorization;
  else if (secret !== null) headers.Authorization = `Bearer ${secret}`;
  if (options.key !== undefined) headers['Idempotency-Key'] = options.key;
  let payload: Buffer | undefined;
  if (options.form !== undefined) {
    payload = Buffer.from(encodeForm(options.form));
    headers['Content-Type'] = 'application/x-www-form-urlencoded';
  } else if (options.json !== undefined) {
    payload = Buffer.from(JSON.stringify(options.json));
    headers['Content-Type'] = 'application/json';
  }
  if (payload) headers['Content-Length'] = String(payload.length);
  const method = options.method ?? (payload ? 'POST' : 'GET');
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers, agent: false, signal: options.signal }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode!, headers: res.headers, text, json: <T>() => JSON.parse(text) as T });
      });
    });
    req.on('error', reject);
    if (options.timeoutMs !== undefined) {
      req.setTimeout(options.timeoutMs, () => req.destroy(new Error(`no answer within ${options.timeoutMs} ms`)));
    }
    req.end(payload);
  });
}

/**
 * Polls until `check` returns a value other than undefined/false (no fixed
 * sleeps). The timeout only guards against a condition that never comes: 30 s,
 * far past what any of these takes on a loaded machine. A timeout names the
 * condition and says what `seen` last saw.
 */
export async function waitFor<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  seen?: () => unknown,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (performance.now() > deadline) {
      const saw = seen ? `; saw ${JSON.stringify(await seen())}` : '';
      throw new Error(`not within ${timeoutMs} ms: ${String(check)}${saw}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Starts simulators and closes every one of them after each test. */
export function simulators(): (options?: Partial<SimulatorOptions>) => Promise<RunningSimulator> {
  const running: RunningSimulator[] = [];
  afterEach(async () => {
    await Promise.all(running.splice(0).map((s) => s.close()));
  });
  return async (options = {}) => {
    const sim = await startCardNetworkSimulator({ secrets: [SECRET, OTHER_SECRET], delayMs: 0, ...options });
    running.push(sim);
    return sim;
  };
}

export const VISA = { amount: 1000, currency: 'usd', payment_method: 'pm_card_visa', confirm: 'true' };

export interface ListBody<T = Record<string, unknown>> {
  object: 'list';
  url: string;
  data: T[];
  has_more: boolean;
}

export async function listIntents(baseUrl: string, secret = SECRET): Promise<Record<string, unknown>[]> {
  const res = await call(baseUrl, { path: '/v1/payment_intents?limit=100', secret });
  expect(res.status).toBe(200);
  return res.json<ListBody>().data;
}

/** The official SDK pointed at a simulator, as the app builds it; no retries unless asked. */
export function stripeClient(sim: RunningSimulator, options: { secret?: string; timeoutMs?: number; maxNetworkRetries?: number } = {}): Stripe {
  return new Stripe(options.secret ?? SECRET, {
    host: '127.0.0.1',
    port: sim.port,
    protocol: 'http',
    timeout: options.timeoutMs ?? 5_000,
    maxNetworkRetries: options.maxNetworkRetries ?? 0,
    telemetry: false,
  });
}

export interface Delivery {
  headers: IncomingHttpHeaders;
  /** The raw body, exactly as constructEvent must be given it. */
  payload: string;
  event: { id: string; type: string; data: { object: Record<string, unknown> }; [field: string]: unknown };
  at: number;
  /** Whether its connection has ended (answered, or closed by the sender). */
  closed: boolean;
}

export interface Receiver {
  url: string;
  deliveries: Delivery[];
  close(): Promise<void>;
}

/**
 * A webhook endpoint on a free local port that records every POST. `answer` picks
 * the status of the nth request (1-based); null leaves that request unanswered.
 */
export function receivers(): (answer?: (n: number, delivery: Delivery) => number | null) => Promise<Receiver> {
  const running: Receiver[] = [];
  afterEach(async () => {
    await Promise.all(running.splice(0).map((r) => r.close()));
  });
  return (answer = () => 200) =>
    new Promise((resolveReceiver) => {
      const deliveries: Delivery[] = [];
      const server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const payload = Buffer.concat(chunks).toString('utf8');
          const delivery: Delivery = { headers: req.headers, payload, event: JSON.parse(payload) as Delivery['event'], at: performance.now(), closed: false };
          res.once('close', () => (delivery.closed = true));
          deliveries.push(delivery);
          const status = answer(deliveries.length, delivery);
          if (status === null) return;
          res.statusCode = status;
          res.end();
        });
      });
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        const receiver: Receiver = {
          url: `http://127.0.0.1:${port}/webhooks/stripe`,
          deliveries,
          close: () =>
            new Promise<void>((resolveClose) => {
              server.close(() => resolveClose());
              server.closeAllConnections();
            }),
        };
        running.push(receiver);
        resolveReceiver(receiver);
      });
    });
}

/** An unconfirmed PaymentIntent as the app creates one (nothing charged yet). */
export async function createUnconfirmed(stripe: Stripe, paymentMethod: string): Promise<Stripe.PaymentIntent> {
  const intent = await stripe.paymentIntents.create({
    amount: 1000,
    currency: 'usd',
    payment_method: paymentMethod,
    automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
    metadata: { payment_id: 'pay_1' },
  });
  expect(intent).toMatchObject({ status: 'requires_confirmation', amount_received: 0, latest_charge: null });
  return intent;
}

/** The types of the account's events, oldest first. */
export async function eventTypes(sim: RunningSimulator): Promise<string[]> {
  const events = (await call(sim.url, { path: '/v1/events?limit=100' })).json<ListBody<{ type: string }>>().data;
  return events.map((e) => e.type).reverse();
}
