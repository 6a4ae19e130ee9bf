import { randomBytes } from 'node:crypto';
import { IncomingMessage, Server, ServerResponse, createServer } from 'node:http';
import { AddressInfo } from 'node:net';

/**
 * A card network that speaks a subset of Stripe's HTTP API, with Stripe's
 * idempotency semantics, so that "was the card charged, and how often?" has an
 * answer outside the app: its ledger. It runs inside the app (the default, like
 * the embedded PostgreSQL) or as its own process (`npm run card-network`), whose
 * ledger then outlives a crashed app.
 *
 * The one timing rule that makes it useful: a charge or refund is RECORDED AS
 * SOON AS THE REQUEST ARRIVES and answered `delayMs` later. A caller that dies
 * during the delay leaves "card charged, answer lost", as in the real world;
 * the result is still saved under its Idempotency-Key, so a retry replays it.
 *
 * Endpoints: POST/GET /v1/payment_intents, GET /v1/payment_intents/:id,
 * POST/GET /v1/refunds. Form-encoded bodies (metadata[k]=v), Bearer secret keys;
 * every key has a ledger and idempotency keys of its own, like a Stripe account.
 *
 * Idempotency (every POST with an Idempotency-Key): the same key and parameters
 * replay the saved status and body with `Idempotent-Replayed: true`; other
 * parameters get 400 idempotency_error; a key still in flight gets 409. Saved are
 * 2xx and 402 card errors; validation errors and the processing error are not
 * saved (the key stays free). Keys expire after `idempotencyTtlMs` (24 h).
 *
 * Test payment methods: pm_card_visa / _mastercard / _amex succeed;
 * pm_card_chargeDeclined and pm_card_chargeDeclinedInsufficientFunds are 402
 * card errors (the declined intent is recorded); pm_card_processingError is a
 * 500 api_error `processing_error` with nothing recorded; any other is 400.
 *
 * Fault injection, for tests:
 * - pm_card_chargeThenDrop / pm_card_chargeThenHang / pm_card_chargeThenError
 *   charge and save like pm_card_visa, but the FIRST answer for their key is
 *   lost: the socket is destroyed, never answered, or answered 500 (no code).
 * - POST /_simulator/faults {fault: drop|hang|error, times}: the next `times`
 *   executed POSTs do the same. DELETE /_simulator/faults clears.
 * - POST /_simulator/hold, /_simulator/release: while held, POSTs are accepted
 *   but not executed; one whose caller disconnects is discarded unexecuted
 *   ("never reached the network"). GET /_simulator/stats -> {held}.
 */
export interface SimulatorOptions {
  /** Accepted secret keys, e.g. `sk_test_simulator_0123456789abcdef`. */
  secrets: string[];
  /** Latency: the answer leaves this long after the request arrived. */
  delayMs: number;
  /** How long Idempotency-Keys are kept. Default 24 h. */
  idempotencyTtlMs?: number;
}

export interface RunningSimulator {
  url: string;
  port: number;
  close(): Promise<void>;
}

type Fault = 'drop' | 'hang' | 'error';
type Params = Record<string, string | Record<string, string>>;

interface Answer {
  status: number;
  body: string;
}

interface KeyEntry {
  fingerprint: string;
  answer?: Answer;
  expiresAt: number;
  /** The first answer of a fault payment method is lost once. */
  faultPending?: Fault;
}

interface Intent {
  id: string;
  object: 'payment_intent';
  amount: number;
  amount_received: number;
  currency: string;
  status: 'succeeded' | 'requires_payment_method' | 'requires_confirmation';
  payment_method: string;
  confirmation_method: 'automatic';
  description: string | null;
  metadata: Record<string, string>;
  created: number;
  latest_charge: string | null;
  last_payment_error: null | { type: string; code: string; decline_code: string; message: string };
  livemode: false;
}

interface RefundObject {
  id: string;
  object: 'refund';
  amount: number;
  currency: string;
  payment_intent: string;
  status: 'succeeded';
  metadata: Record<string, string>;
  created: number;
}

interface Account {
  intents: Intent[];
  intentById: Map<string, Intent>;
  refunded: Map<string, number>;
  refunds: RefundObject[];
  keys: Map<string, KeyEntry>;
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly error: Record<string, unknown>,
    /** Saved under the idempotency key (a 402 card error) or not. */
    readonly saved = false,
  ) {
    super(String(error.message));
  }
}

const SUCCEEDING = new Set(['pm_card_visa', 'pm_card_mastercard', 'pm_card_amex']);
const FAULT_METHODS: Record<string, Fault> = {
  pm_card_chargeThenDrop: 'drop',
  pm_card_chargeThenHang: 'hang',
  pm_card_chargeThenError: 'error',
};
const DECLINES: Record<string, { decline_code: string; message: string }> = {
  pm_card_chargeDeclined: { decline_code: 'generic_decline', message: 'Your card was declined.' },
  pm_card_chargeDeclinedInsufficientFunds: { decline_code: 'insufficient_funds', message: 'Your card has insufficient funds.' },
};
const DAY_MS = 24 * 3_600_000;
const MAX_BODY = 64 * 1024;

const id = (prefix: string) => `${prefix}_${randomBytes(18).toString('base64url').replace(/[-_]/g, '').slice(0, 24)}`;
const nowSeconds = () => Math.floor(Date.now() / 1000);
const invalid = (message: string, extra: Record<string, unknown> = {}) =>
  new ApiError(400, { type: 'invalid_request_error', message, ...extra });

/** Stripe's form encoding: `a=1&metadata[k]=v`. */
function parseForm(text: string): Params {
  const params: Params = {};
  for (const [name, value] of new URLSearchParams(text)) {
    const nested = /^([a-z_]+)\[([^\]]*)\]$/.exec(name);
    if (nested) {
      const bag = (params[nested[1]] ??= {});
      if (typeof bag === 'string') throw invalid(`Invalid parameter ${nested[1]}`, { code: 'parameter_invalid', param: nested[1] });
      bag[nested[2]] = value;
    } else {
      params[name] = value;
    }
  }
  return params;
}

function canonical(params: Params): string {
  const sorted = (o: Record<string, unknown>): unknown =>
    Object.keys(o)
      .sort()
      .map((k) => [k, typeof o[k] === 'object' ? sorted(o[k] as Record<string, unknown>) : o[k]]);
  return JSON.stringify(sorted(params));
}

function only(params: Params, allowed: string[]): void {
  for (const name of Object.keys(params)) {
    if (!allowed.includes(name)) throw invalid(`Received unknown parameter: ${name}`, { code: 'parameter_unknown', param: name });
  }
}

function str(params: Params, name: string, required: boolean): string | undefined {
  const v = params[name];
  if (v === undefined || v === '') {
    if (required) throw invalid(`Missing required param: ${name}.`, { code: 'parameter_missing', param: name });
    return undefined;
  }
  if (typeof v !== 'string') throw invalid(`Invalid ${name}`, { code: 'parameter_invalid', param: name });
  return v;
}

function int(params: Params, name: string, required: boolean): number | undefined {
  const v = str(params, name, required);
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v) || Number(v) < 1 || !Number.isSafeInteger(Number(v))) {
    throw invalid(`Invalid integer: ${v}`, { code: 'parameter_invalid_integer', param: name });
  }
  return Number(v);
}

function metadata(params: Params): Record<string, string> {
  const m = params.metadata;
  if (m === undefined) return {};
  if (typeof m === 'string') throw invalid('Invalid metadata', { code: 'parameter_invalid', param: 'metadata' });
  return { ...m };
}

class Simulator {
  private readonly accounts = new Map<string, Account>();
  private readonly ttlMs: number;
  private faults: { fault: Fault; times: number } | null = null;
  private holding = false;
  private readonly held: { run: () => void; gone: () => boolean }[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly options: SimulatorOptions) {
    this.ttlMs = options.idempotencyTtlMs ?? DAY_MS;
    for (const secret of options.secrets) {
      this.accounts.set(secret, { intents: [], intentById: new Map(), refunded: new Map(), refunds: [], keys: new Map() });
    }
    this.sweeper = setInterval(() => this.sweep(), Math.min(this.ttlMs, 60_000));
    this.sweeper.unref();
  }

  stop(): void {
    clearInterval(this.sweeper);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  private sweep(): void {
    const now = Date.now();
    for (const account of this.accounts.values()) {
      for (const [key, entry] of account.keys) if (entry.answer && entry.expiresAt <= now) account.keys.delete(key);
    }
  }

  private later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.setHeader('Request-Id', id('req'));
    try {
      const account = this.authenticate(req);
      const url = new URL(req.url ?? '/', 'http://simulator');
      const body = req.method === 'POST' || req.method === 'DELETE' ? await readBody(req) : '';
      if (url.pathname.startsWith('/_simulator/')) return this.control(req.method ?? '', url.pathname, body, res);
      if (req.method === 'GET') return send(res, { status: 200, body: JSON.stringify(this.read(account, url)) });
      if (req.method !== 'POST') throw new ApiError(405, { type: 'invalid_request_error', message: `Unsupported method ${req.method}` });
      const params = req.headers['content-type']?.includes('application/json')
        ? (JSON.parse(body || '{}') as Params)
        : parseForm(body);
      const run = () => this.post(account, req, res, url.pathname, params);
      if (this.holding) {
        this.held.push({ run, gone: () => req.socket.destroyed });
        return;
      }
      run();
    } catch (error) {
      if (error instanceof ApiError) return send(res, { status: error.status, body: JSON.stringify({ error: error.error }) });
      send(res, { status: 500, body: JSON.stringify({ error: { type: 'api_error', message: (error as Error).message } }) });
    }
  }

  private authenticate(req: IncomingMessage): Account {
    const header = req.headers.authorization ?? '';
    let secret = '';
    if (header.startsWith('Bearer ')) secret = header.slice(7).trim();
    else if (header.startsWith('Basic ')) secret = Buffer.from(header.slice(6), 'base64').toString().split(':')[0];
    const account = this.accounts.get(secret);
    if (!account) {
      const masked = secret.length > 8 ? `${secret.slice(0, 8)}****${secret.slice(-4)}` : '****';
      throw new ApiError(401, { type: 'invalid_request_error', message: `Invalid API Key provided: ${masked}` });
    }
    return account;
  }

  private control(method: string, path: string, body: string, res: ServerResponse): void {
    const ok = (value: unknown) => send(res, { status: 200, body: JSON.stringify(value) });
    if (path === '/_simulator/faults' && method === 'POST') {
      const p = body.trim().startsWith('{') ? (JSON.parse(body) as Record<string, unknown>) : Object.fromEntries(new URLSearchParams(body));
      const fault = String(p.fault) as Fault;
      if (!['drop', 'hang', 'error'].includes(fault)) throw invalid('fault must be drop, hang or error', { param: 'fault' });
      this.faults = { fault, times: Number(p.times ?? 1) };
      return ok(this.faults);
    }
    if (path === '/_simulator/faults' && method === 'DELETE') {
      this.faults = null;
      return ok({});
    }
    if (path === '/_simulator/hold' && method === 'POST') {
      this.holding = true;
      return ok({ holding: true });
    }
    if (path === '/_simulator/release' && method === 'POST') {
      this.holding = false;
      for (const h of this.held.splice(0)) if (!h.gone()) h.run();
      return ok({ holding: false });
    }
    if (path === '/_simulator/stats' && method === 'GET') {
      return ok({ held: this.held.filter((h) => !h.gone()).length });
    }
    throw new ApiError(404, { type: 'invalid_request_error', message: `Unrecognized request URL (${method}: ${path})` });
  }

  /** A POST: idempotency first, then the operation, recorded now and answered after the delay. */
  private post(account: Account, req: IncomingMessage, res: ServerResponse, path: string, params: Params): void {
    const rawKey = req.headers['idempotency-key'];
    const key = typeof rawKey === 'string' && rawKey !== '' ? rawKey : undefined;
    if (key) res.setHeader('Idempotency-Key', key);
    const fingerprint = `${path}\n${canonical(params)}`;
    let entry: KeyEntry | undefined;
    if (key) {
      if (key.length > 255) {
        return send(res, { status: 400, body: JSON.stringify({ error: { type: 'invalid_request_error', message: 'Idempotency-Key too long' } }) });
      }
      const found = account.keys.get(key);
      if (found && found.expiresAt <= Date.now() && found.answer) account.keys.delete(key);
      const existing = account.keys.get(key);
      if (existing) {
        if (existing.fingerprint !== fingerprint) {
          return sendError(res, 400, {
            type: 'idempotency_error',
            message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
          });
        }
        if (!existing.answer) {
          return sendError(res, 409, {
            type: 'idempotency_error',
            code: 'idempotency_key_in_use',
            message: `There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): ${key}. Please try again later.`,
          });
        }
        res.setHeader('Idempotent-Replayed', 'true');
        return send(res, existing.answer);
      }
      entry = { fingerprint, expiresAt: Date.now() + this.ttlMs };
      account.keys.set(key, entry);
    }

    let answer: Answer;
    let saved: boolean;
    let fault: Fault | undefined;
    try {
      const result = this.execute(account, path, params);
      answer = { status: 200, body: JSON.stringify(result.object) };
      saved = true;
      fault = result.fault;
    } catch (error) {
      const e = error instanceof ApiError ? error : new ApiError(500, { type: 'api_error', message: (error as Error).message });
      answer = { status: e.status, body: JSON.stringify({ error: e.error }) };
      saved = e.saved;
      // As Stripe does for answers a retry cannot change: the SDK then does not retry.
      if (e.status === 402 || e.error.code === 'processing_error') res.setHeader('Stripe-Should-Retry', 'false');
    }
    if (saved && this.faults && this.faults.times > 0) {
      fault ??= this.faults.fault;
      if (--this.faults.times === 0) this.faults = null;
    }
    this.later(this.options.delayMs, () => {
      if (entry && key) {
        if (saved) entry.answer = answer;
        else account.keys.delete(key);
      }
      switch (fault) {
        case 'drop':
          res.socket?.destroy();
          return;
        case 'hang':
          return;
        case 'error':
          return sendError(res, 500, { type: 'api_error', message: 'An unexpected error occurred after the request was processed.' });
        default:
          send(res, answer);
      }
    });
  }

  private execute(account: Account, path: string, params: Params): { object: unknown; fault?: Fault } {
    if (path === '/v1/payment_intents') return this.createIntent(account, params);
    if (path === '/v1/refunds') return { object: this.createRefund(account, params) };
    throw new ApiError(404, { type: 'invalid_request_error', message: `Unrecognized request URL (POST: ${path})` });
  }

  private createIntent(account: Account, params: Params): { object: Intent; fault?: Fault } {
    only(params, ['amount', 'currency', 'payment_method', 'confirm', 'description', 'metadata', 'automatic_payment_methods', 'payment_method_types']);
    const amount = int(params, 'amount', true)!;
    const currency = str(params, 'currency', true)!.toLowerCase();
    if (!/^[a-z]{3}$/.test(currency)) throw invalid(`Invalid currency: ${currency}`, { code: 'parameter_invalid', param: 'currency' });
    const method = str(params, 'payment_method', true)!;
    const confirm = str(params, 'confirm', false) === 'true';
    const known = SUCCEEDING.has(method) || method in FAULT_METHODS || method in DECLINES || method === 'pm_card_processingError';
    if (!known) throw invalid(`No such PaymentMethod: '${method}'`, { code: 'resource_missing', param: 'payment_method' });
    if (confirm && method === 'pm_card_processingError') {
      throw new ApiError(500, {
        type: 'api_error',
        code: 'processing_error',
        message: 'An error occurred while processing your card. Nothing was charged; try again.',
      });
    }
    const intent: Intent = {
      id: id('pi'),
      object: 'payment_intent',
      amount,
      amount_received: 0,
      currency,
      status: 'requires_confirmation',
      payment_method: method,
      confirmation_method: 'automatic',
      description: str(params, 'description', false) ?? null,
      metadata: metadata(params),
      created: nowSeconds(),
      latest_charge: null,
      last_payment_error: null,
      livemode: false,
    };
    const decline = confirm ? DECLINES[method] : undefined;
    if (decline) {
      intent.status = 'requires_payment_method';
      intent.last_payment_error = { type: 'card_error', code: 'card_declined', ...decline };
    } else if (confirm) {
      intent.status = 'succeeded';
      intent.amount_received = amount;
      intent.latest_charge = id('ch');
    }
    account.intents.push(intent);
    account.intentById.set(intent.id, intent);
    if (decline) {
      throw new ApiError(402, { type: 'card_error', code: 'card_declined', ...decline, payment_intent: intent }, true);
    }
    return { object: intent, fault: confirm ? FAULT_METHODS[method] : undefined };
  }

  private createRefund(account: Account, params: Params): RefundObject {
    only(params, ['payment_intent', 'amount', 'metadata']);
    const piId = str(params, 'payment_intent', true)!;
    const intent = account.intentById.get(piId);
    if (!intent) throw invalid(`No such payment_intent: '${piId}'`, { code: 'resource_missing', param: 'payment_intent' });
    if (intent.status !== 'succeeded') throw invalid(`PaymentIntent ${piId} has no successful charge to refund.`, { param: 'payment_intent' });
    const remaining = intent.amount - (account.refunded.get(piId) ?? 0);
    if (remaining <= 0) throw invalid(`Charge for ${piId} has already been refunded.`, { code: 'charge_already_refunded' });
    const amount = int(params, 'amount', false) ?? remaining;
    if (amount > remaining) {
      throw invalid(`Refund amount (${amount}) is greater than unrefunded amount on charge (${remaining})`, { code: 'amount_too_large', param: 'amount' });
    }
    account.refunded.set(piId, intent.amount - remaining + amount);
    const refund: RefundObject = {
      id: id('re'),
      object: 'refund',
      amount,
      currency: intent.currency,
      payment_intent: piId,
      status: 'succeeded',
      metadata: metadata(params),
      created: nowSeconds(),
    };
    account.refunds.push(refund);
    return refund;
  }

  private read(account: Account, url: URL): unknown {
    const one = /^\/v1\/payment_intents\/([^/]+)$/.exec(url.pathname);
    if (one) {
      const intent = account.intentById.get(decodeURIComponent(one[1]));
      if (!intent) throw new ApiError(404, { type: 'invalid_request_error', code: 'resource_missing', param: 'id', message: `No such payment_intent: '${one[1]}'` });
      return intent;
    }
    if (url.pathname === '/v1/payment_intents') return list(url, '/v1/payment_intents', account.intents);
    if (url.pathname === '/v1/refunds') {
      const pi = url.searchParams.get('payment_intent');
      return list(url, '/v1/refunds', pi ? account.refunds.filter((r) => r.payment_intent === pi) : account.refunds);
    }
    throw new ApiError(404, { type: 'invalid_request_error', message: `Unrecognized request URL (GET: ${url.pathname})` });
  }
}

/** Stripe's list shape, newest first (creation order, never a clock). */
function list<T extends { id: string }>(url: URL, path: string, items: T[]): unknown {
  const limitText = url.searchParams.get('limit') ?? '10';
  const limit = Number(limitText);
  if (!/^\d+$/.test(limitText) || limit < 1 || limit > 100) throw invalid('limit must be between 1 and 100', { param: 'limit' });
  const newest = [...items].reverse();
  let start = 0;
  const after = url.searchParams.get('starting_after');
  if (after) {
    const at = newest.findIndex((i) => i.id === after);
    if (at < 0) throw invalid(`No such object: '${after}'`, { code: 'resource_missing', param: 'starting_after' });
    start = at + 1;
  }
  const data = newest.slice(start, start + limit);
  return { object: 'list', url: path, data, has_more: start + limit < newest.length };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(invalid('Request body too large'));
        req.destroy();
      } else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, answer: Answer): void {
  if (res.writableEnded || res.destroyed) return;
  res.writeHead(answer.status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(answer.body) });
  res.end(answer.body);
}

function sendError(res: ServerResponse, status: number, error: Record<string, unknown>): void {
  send(res, { status, body: JSON.stringify({ error }) });
}

export async function startCardNetworkSimulator(options: SimulatorOptions & { port?: number; host?: string }): Promise<RunningSimulator> {
  if (options.secrets.length === 0) throw new Error('the card network simulator needs at least one secret key');
  const simulator = new Simulator(options);
  const server: Server = createServer((req, res) => void simulator.handle(req, res));
  server.keepAliveTimeout = 30_000;
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        simulator.stop();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
