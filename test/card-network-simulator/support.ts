import { IncomingHttpHeaders, request } from 'node:http';
import { RunningSimulator, SimulatorOptions, startCardNetworkSimulator } from '../../src/card-network-simulator';

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

/** Polls until `check` returns a value other than undefined/false (no fixed sleeps). */
export async function waitFor<T>(check: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 5_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (performance.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
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
