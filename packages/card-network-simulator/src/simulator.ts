/**
 * A card network that speaks a small subset of Stripe's HTTP API, so the payment
 * path can be exercised against a real remote protocol (latency, lost answers,
 * Stripe's own Idempotency-Key rules, webhooks) without the internet. Plain
 * node:http and in-memory state: it starts in milliseconds inside a test and
 * never needs Nest.
 *
 * Why the timing matters: every effect (an intent created, confirmed or canceled,
 * a refund) happens the moment the request arrives, is visible at once through
 * the GET endpoints and emits its event (and webhook) then, while the answer goes
 * out `delayMs` after arrival. A caller that crashes or gives up during the delay
 * therefore leaves "card charged, answer lost", which is the case exactly-once
 * payments must survive: a retry with the same key replays, a GET tells the
 * state, and the webhook tells what the lost answer would have.
 *
 * Fault injection (per secret key, same Bearer auth as the API):
 *
 *   POST   /_simulator/faults   {"fault": "drop" | "hang" | "error", "times": n}  (JSON or form)
 *          The next n POSTs to /v1/* that execute and save a result (or replay
 *          one; not validation errors) are executed and saved normally, then
 *          their answer is lost: `drop` destroys the socket, `hang` never
 *          answers (the socket stays open until the client gives up or close()),
 *          `error` answers 500 api_error without a `code`.
 *   POST   /_simulator/faults   {"fault": "saved_error", "times": n}
 *          The next n POSTs to /v1/* with an Idempotency-Key that would execute
 *          (not replays, not validation errors) are NOT executed (no effect, no
 *          event): a 500 api_error is saved under the key instead, as Stripe saves
 *          a 500 of a request it began, and every retry with that key and the same
 *          parameters replays it (Idempotent-Replayed: true) until the key window
 *          (idempotencyTtlMs) ends; after it the key is free and the request runs.
 *   POST   /_simulator/refusals {"status": 400 | 401 | 429, "times": n, "after": k, "param": p}
 *          The next n requests to /v1/* (any method), after k that pass, are
 *          refused before anything is done: 400 invalid_request_error, 401 (a
 *          rotated key), 429 (a rate limit), with Stripe-Should-Retry: false.
 *          A 400 with `param` names that parameter, as Stripe's refusal of a
 *          value does (`amount`, `currency`). Such an answer speaks only for its
 *          own request.
 *   DELETE /_simulator/faults   clears the pending faults and refusals.
 *   POST   /_simulator/hold     incoming POSTs to /v1/* are accepted but not
 *          executed. A held request whose client disconnects is discarded
 *          without effect ("the request never reached the network").
 *   POST   /_simulator/release  executes the still-connected held requests in
 *          arrival order (their delay counts from the release) and stops holding.
 *   POST   /_simulator/webhook-faults, DELETE /_simulator/webhook-faults,
 *   POST   /_simulator/webhooks/pause, /_simulator/webhooks/resume: see webhooks.ts.
 *   GET    /_simulator/stats    held requests, pending faults, webhook counts.
 *
 * Test payment methods with fault behaviour of their own: pm_card_chargeThenDrop,
 * pm_card_chargeThenHang and pm_card_chargeThenError charge like pm_card_visa and
 * save the success under the Idempotency-Key, but the first answer is lost the
 * same way; a replay then answers normally.
 *
 * Test payment methods whose refunds settle later, `processingMs` after the
 * refund (they charge like pm_card_visa): pm_card_refundPending (pending, then
 * succeeded: refund.updated), pm_card_refundPendingFail (pending, then failed:
 * refund.updated, refund.failed, the amount refundable again) and
 * pm_card_refundFail (succeeded, then failed the same way, as Stripe's
 * asynchronous failure card). Every other method's refund succeeds at once.
 *
 * Card tokens (POST /v1/tokens, tokens.ts) pay through PaymentIntent create's
 * `payment_method_data[type]=card&payment_method_data[card][token]=tok_...`: the
 * intent gets a new pm_... that behaves as the token's card number says.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { ApiError, ErrorBody, invalid, noSuch, randomId, stripeId, unixSeconds } from './api';
import { checkCurrency, checkMinimum } from './money';
import { prepareToken, redeemToken, TOKEN_PARAM, TOKEN_PARAMS, TokenRecord } from './tokens';
import { WebhookDispatcher } from './webhook-dispatcher';
import {
  EVENT_API_VERSION,
  PendingWebhookFault,
  SimulatorEvent,
  SimulatorEventType,
  WEBHOOK_FAULTS,
  WebhookChannel,
  WebhookOptions,
  WebhookTarget,
} from './webhooks';

export interface SimulatorOptions {
  /** Accepted secret keys (Bearer, or HTTP Basic username); each one is an account of its own. */
  secrets: string[];
  /** Latency: the answer goes out this long after the request arrived. */
  delayMs: number;
  /** How long a saved Idempotency-Key result is kept (every POST); default 24h. */
  idempotencyTtlMs?: number;
  /** How long a `processing` intent (pm_card_chargeProcessing) takes to succeed, and a late refund (pm_card_refund*) to settle; default 1 s. */
  processingMs?: number;
  /** Where events are delivered; also settable after start with setWebhook. */
  webhook?: WebhookOptions;
}

export interface RunningSimulator {
  url: string;
  port: number;
  /** Points webhook delivery at an endpoint (from the next attempt on), or stops it with null. */
  setWebhook(target: WebhookTarget | null): void;
  close(): Promise<void>;
}

/** A fault that loses the answer of an executed request. */
export type LostAnswerFault = 'drop' | 'hang' | 'error';
/** `saved_error`: a 500 saved under the key instead of executing. */
export type SimulatorFault = LostAnswerFault | 'saved_error';

const DEFAULT_TTL_MS = 24 * 3_600_000;
const DEFAULT_PROCESSING_MS = 1_000;
const MAX_BODY_BYTES = 1 << 20;
const MAX_KEY_LENGTH = 255;
const MAX_AMOUNT = 99_999_999;

type Metadata = Record<string, string>;

export const PAYMENT_INTENT_STATUSES = [
  'requires_payment_method',
  'requires_confirmation',
  'requires_action',
  'processing',
  'succeeded',
  'canceled',
] as const;
export type PaymentIntentStatus = (typeof PAYMENT_INTENT_STATUSES)[number];

/** Where each action is allowed, as Stripe's payment_intent_unexpected_state enforces it. */
const CONFIRMABLE: readonly PaymentIntentStatus[] = ['requires_confirmation', 'requires_payment_method'];
const CANCELABLE: readonly PaymentIntentStatus[] = ['requires_payment_method', 'requires_confirmation', 'requires_action'];
const CANCELLATION_REASONS = ['duplicate', 'fraudulent', 'requested_by_customer', 'abandoned'];

interface PaymentError {
  type: 'card_error';
  code: 'card_declined' | 'processing_error' | 'authentication_required';
  decline_code?: string;
  message: string;
}

interface PaymentIntent {
  id: string;
  object: 'payment_intent';
  amount: number;
  amount_received: number;
  currency: string;
  status: PaymentIntentStatus;
  payment_method: string;
  confirmation_method: 'automatic';
  description: string | null;
  metadata: Metadata;
  created: number;
  latest_charge: string | null;
  last_payment_error: PaymentError | null;
  next_action: { type: 'use_stripe_sdk'; use_stripe_sdk: { type: 'three_d_secure_redirect' } } | null;
  canceled_at: number | null;
  cancellation_reason: string | null;
  livemode: false;
}

export const REFUND_STATUSES = ['pending', 'succeeded', 'failed', 'canceled'] as const;
export type RefundStatus = (typeof REFUND_STATUSES)[number];

interface Refund {
  id: string;
  object: 'refund';
  amount: number;
  charge: string | null;
  currency: string;
  payment_intent: string;
  status: RefundStatus;
  /** Only on a failed refund, as Stripe shows it. */
  failure_reason?: 'declined';
  metadata: Metadata;
  created: number;
}

interface IntentRecord {
  intent: PaymentIntent;
  refunded: number;
}

type KeyEntry =
  | { state: 'in_flight'; fingerprint: string }
  | { state: 'done'; fingerprint: string; status: number; body: string; requestId: string; expiresAt: number };

interface Account {
  /** Insertion order is creation order: the lists walk these maps backwards. */
  intents: Map<string, IntentRecord>;
  refunds: Map<string, Refund>;
  events: Map<string, SimulatorEvent>;
  tokens: Map<string, TokenRecord>;
  /** PaymentMethods made from a token: id -> the test method whose behaviour the card has. */
  methods: Map<string, string>;
  keys: Map<string, KeyEntry>;
  faults: SimulatorFault[];
  /** Refusals of requests to /v1/* before anything is done; `skip`: requests let through first. */
  refusals: { status: RefusalStatus; skip: number; param?: string }[];
  holding: boolean;
  held: Set<PendingPost>;
  webhooks: WebhookChannel;
}

export type RefusalStatus = 400 | 401 | 429;
const REFUSALS: Record<RefusalStatus, ErrorBody> = {
  400: { type: 'invalid_request_error', code: 'parameter_invalid', message: 'Invalid request (refused by a simulator fault).' },
  401: { type: 'invalid_request_error', message: 'Invalid API Key provided (refused by a simulator fault).' },
  429: { type: 'invalid_request_error', code: 'rate_limit', message: 'Too many requests hit the API too quickly (refused by a simulator fault).' },
};

/** Who caused an effect: the request its event names. */
interface Cause {
  account: Account;
  request: SimulatorEvent['request'];
}

/** A POST to /v1/*, validated, waiting to be executed (at once, or on release). */
interface PendingPost {
  res: ServerResponse;
  requestId: string;
  /** The request's path: part of the key's fingerprint. */
  path: string;
  params: ParsedParams;
  key: string | undefined;
  /** Validates against the current state (an ApiError leaves no trace), then returns the effect to run. */
  prepare: (cause: Cause) => () => Outcome;
}

interface ParsedParams {
  values: Map<string, string>;
  metadata: Metadata | undefined;
}

/** What an executed POST answers; `save` says whether it is kept under the key. */
interface Outcome {
  status: number;
  body: unknown;
  save: boolean;
  fault?: LostAnswerFault;
}

/** As Stripe does for answers a retry cannot change (a decline, a processing error): SDKs then do not retry. */
function retryAdvice(outcome: Outcome): Record<string, string> {
  return outcome.status === 402 ? { 'Stripe-Should-Retry': 'false' } : {};
}

/** When a refund of a charge settles: at once, or `processingMs` later as succeeded or failed. */
type RefundFlow = 'pending_then_succeeded' | 'pending_then_failed' | 'succeeded_then_failed';

type MethodBehaviour =
  | { kind: 'charge'; fault?: LostAnswerFault; refund?: RefundFlow }
  | { kind: 'decline'; decline_code: string; message: string }
  | { kind: 'processing_error' }
  | { kind: 'authentication_required' }
  | { kind: 'processing' };

/**
 * Stripe's test PaymentMethods, plus ours: three that lose the first answer, one
 * that stays processing a while, and three whose refunds settle later.
 */
const PAYMENT_METHODS: Record<string, MethodBehaviour> = {
  pm_card_visa: { kind: 'charge' },
  pm_card_mastercard: { kind: 'charge' },
  pm_card_amex: { kind: 'charge' },
  pm_card_chargeDeclined: { kind: 'decline', decline_code: 'generic_decline', message: 'Your card was declined.' },
  pm_card_chargeDeclinedInsufficientFunds: {
    kind: 'decline',
    decline_code: 'insufficient_funds',
    message: 'Your card has insufficient funds.',
  },
  pm_card_processingError: { kind: 'processing_error' },
  pm_card_authenticationRequired: { kind: 'authentication_required' },
  pm_card_chargeProcessing: { kind: 'processing' },
  pm_card_chargeThenDrop: { kind: 'charge', fault: 'drop' },
  pm_card_chargeThenHang: { kind: 'charge', fault: 'hang' },
  pm_card_chargeThenError: { kind: 'charge', fault: 'error' },
  pm_card_refundPending: { kind: 'charge', refund: 'pending_then_succeeded' },
  pm_card_refundPendingFail: { kind: 'charge', refund: 'pending_then_failed' },
  pm_card_refundFail: { kind: 'charge', refund: 'succeeded_then_failed' },
};

const PROCESSING_ERROR: PaymentError = {
  type: 'card_error',
  code: 'processing_error',
  message: 'An error occurred while processing your card. Try again in a little bit.',
};
const AUTHENTICATION_REQUIRED: PaymentError = {
  type: 'card_error',
  code: 'authentication_required',
  decline_code: 'authentication_required',
  message: 'Your card was declined. This transaction requires authentication.',
};

const LOST_ANSWER_FAULTS: readonly LostAnswerFault[] = ['drop', 'hang', 'error'];
const FAULTS: readonly SimulatorFault[] = [...LOST_ANSWER_FAULTS, 'saved_error'];
const isLostAnswer = (fault: SimulatorFault): fault is LostAnswerFault => fault !== 'saved_error';
/** Stripe's 500: an `error` fault's answer, and what a `saved_error` fault saves under the key. */
const INTERNAL_ERROR = { error: { type: 'api_error', message: 'An unknown error occurred while processing your request.' } };

/** `sk_test_****cdef`: enough to recognise a key in a log, never enough to use it. */
export function maskSecret(secret: string): string {
  const prefix = /^(sk|rk|pk)_(test|live)_/.exec(secret)?.[0] ?? '';
  const rest = secret.slice(prefix.length);
  return `${prefix}****${rest.length > 8 ? rest.slice(-4) : ''}`;
}

function unexpectedState(intent: PaymentIntent, message: string): ApiError {
  return new ApiError(400, {
    type: 'invalid_request_error',
    code: 'payment_intent_unexpected_state',
    message,
    payment_intent: structuredClone(intent),
  });
}

/**
 * What POST /v1/payment_intents accepts. `automatic_payment_methods[...]` is how a
 * server confirms a card with no redirect-based method (Stripe then needs no
 * return_url); every card here is such a method, so it is accepted and changes nothing.
 * `payment_method_data[...]` pays with a card token instead of `payment_method`.
 */
const PAYMENT_INTENT_PARAMS = [
  'amount',
  'currency',
  'payment_method',
  'payment_method_data[type]',
  TOKEN_PARAM,
  'confirm',
  'error_on_requires_action',
  'description',
  'automatic_payment_methods[enabled]',
  'automatic_payment_methods[allow_redirects]',
] as const;
const CONFIRM_PARAMS = ['payment_method', 'error_on_requires_action'] as const;
const CANCEL_PARAMS = ['cancellation_reason'] as const;

/** Stripe's bracket notation: `metadata[k]=v` goes into an object, anything unlisted is refused. */
function parseParams(search: URLSearchParams, allowed: readonly string[], withMetadata: boolean): ParsedParams {
  const values = new Map<string, string>();
  let metadata: Metadata | undefined;
  for (const [name, value] of search) {
    const meta = withMetadata ? /^metadata\[([^[\]]+)\]$/.exec(name) : null;
    if (meta) {
      metadata ??= {};
      metadata[meta[1]] = value;
    } else if (allowed.includes(name)) {
      values.set(name, value);
    } else {
      throw invalid(`Received unknown parameter: ${name}`, 'parameter_unknown', name);
    }
  }
  return { values, metadata };
}

/**
 * Order-independent: the same parameters in any order give the same fingerprint.
 * Kept only as a keyed hash (see executePost), since a token's parameters hold a card number.
 */
function fingerprint(method: string, path: string, params: ParsedParams): string {
  const byName = (a: [string, string], b: [string, string]) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
  return JSON.stringify([
    method,
    path,
    [...params.values].sort(byName),
    params.metadata ? Object.entries(params.metadata).sort(byName) : null,
  ]);
}

function emptyRefused(name: string): ApiError {
  return invalid(
    `You passed an empty string for '${name}'. We assume empty values are an attempt to unset a parameter; however '${name}' cannot be unset.`,
    'parameter_invalid_empty',
    name,
  );
}

function requiredString(params: ParsedParams, name: string): string {
  const value = params.values.get(name);
  if (value === undefined) throw invalid(`Missing required param: ${name}.`, 'parameter_missing', name);
  if (value === '') throw emptyRefused(name);
  return value;
}

function integer(params: ParsedParams, name: string, min: number, max: number, tooSmallCode: string): number | undefined {
  const raw = params.values.get(name);
  if (raw === undefined) return undefined;
  if (!/^-?\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw invalid(`Invalid integer: ${raw}`, 'parameter_invalid_integer', name);
  }
  const value = Number(raw);
  if (value < min) throw invalid(`This value must be greater than or equal to ${min}.`, tooSmallCode, name);
  if (value > max) throw invalid(`This value must be less than or equal to ${max}.`, name === 'amount' ? 'amount_too_large' : 'parameter_invalid_integer', name);
  return value;
}

function boolean(params: ParsedParams, name: string): boolean {
  const raw = params.values.get(name);
  if (raw === undefined || raw === 'false') return false;
  if (raw === 'true') return true;
  throw invalid(`Invalid boolean: ${raw}`, 'parameter_invalid_boolean', name);
}

const isTestMethod = (name: string): boolean => Object.hasOwn(PAYMENT_METHODS, name);

/** A test PaymentMethod by name (or one made from a token), or the 400 Stripe answers for an unknown one. */
function paymentMethod(account: Account, name: string): MethodBehaviour {
  const test = account.methods.get(name) ?? name;
  if (!isTestMethod(test)) throw invalid(`No such PaymentMethod: '${name}'`, 'resource_missing', 'payment_method');
  return PAYMENT_METHODS[test];
}

function checkMetadata(metadata: Metadata | undefined): Metadata {
  const entries = Object.entries(metadata ?? {});
  if (entries.length > 50) throw invalid('Metadata can have at most 50 keys.', 'parameter_invalid_metadata', 'metadata');
  for (const [k, v] of entries) {
    if (k.length > 40) throw invalid(`Metadata keys can be at most 40 characters: ${k}`, 'parameter_invalid_metadata', `metadata[${k}]`);
    if (v.length > 500) throw invalid(`Metadata values can be at most 500 characters.`, 'parameter_invalid_metadata', `metadata[${k}]`);
  }
  return Object.fromEntries(entries);
}

function paginate<T extends { id: string }>(newestFirst: T[], params: ParsedParams, url: string, kind: string) {
  const limit = integer(params, 'limit', 1, 100, 'parameter_invalid_integer') ?? 10;
  let start = 0;
  const after = params.values.get('starting_after');
  if (after !== undefined) {
    const index = newestFirst.findIndex((item) => item.id === after);
    if (index < 0) throw noSuch(kind, after, 'starting_after');
    start = index + 1;
  }
  const data = newestFirst.slice(start, start + limit);
  return { object: 'list', url, data, has_more: start + limit < newestFirst.length };
}

/** A control endpoint's body: JSON (an object) or a form. */
function controlInput(req: IncomingMessage, raw: string): Record<string, unknown> {
  if (!(req.headers['content-type'] ?? '').includes('json')) return Object.fromEntries(new URLSearchParams(raw));
  try {
    const parsed: unknown = JSON.parse(raw || '{}');
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
    return parsed as Record<string, unknown>;
  } catch {
    throw invalid('Invalid JSON body.', 'parameter_invalid_json');
  }
}

function controlChoice<T extends string>(input: Record<string, unknown>, name: string, choices: readonly T[]): T {
  const value = input[name];
  if (typeof value !== 'string' || !choices.includes(value as T)) {
    throw invalid(`${name} must be one of ${choices.join(', ')}`, 'parameter_invalid', name);
  }
  return value as T;
}

function controlInteger(input: Record<string, unknown>, name: string, fallback: number, min: number, max: number): number {
  const value = input[name] === undefined ? fallback : Number(input[name]);
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw invalid(`${name} must be an integer from ${min} to ${max}`, 'parameter_invalid_integer', name);
  }
  return value;
}

/** Takes the first queued fault of a kind out of the account's queue (one queue keeps the order they were asked in). */
function takeFault<F extends SimulatorFault>(account: Account, kind: (f: SimulatorFault) => f is F): F | undefined {
  const index = account.faults.findIndex(kind);
  return index < 0 ? undefined : (account.faults.splice(index, 1)[0] as F);
}

function newAccount(): Account {
  return {
    intents: new Map(),
    refunds: new Map(),
    events: new Map(),
    tokens: new Map(),
    methods: new Map(),
    keys: new Map(),
    faults: [],
    refusals: [],
    holding: false,
    held: new Set(),
    webhooks: new WebhookChannel(),
  };
}

export function startCardNetworkSimulator(
  options: SimulatorOptions & { port?: number; host?: string },
): Promise<RunningSimulator> {
  const delayMs = options.delayMs;
  const ttlMs = options.idempotencyTtlMs ?? DEFAULT_TTL_MS;
  const processingMs = options.processingMs ?? DEFAULT_PROCESSING_MS;
  if (!Number.isFinite(delayMs) || delayMs < 0) throw new RangeError('delayMs must be a non-negative number');
  if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new RangeError('idempotencyTtlMs must be a positive number');
  if (!Number.isFinite(processingMs) || processingMs < 0) throw new RangeError('processingMs must be a non-negative number');
  if (options.secrets.length === 0 || options.secrets.some((s) => s.length === 0)) {
    throw new RangeError('at least one non-empty secret key is required');
  }
  const webhooks = new WebhookDispatcher(options.webhook);
  const fingerprintKey = randomBytes(32);
  const accounts = new Map(options.secrets.map((secret) => [secret, newAccount()] as const));
  const timers = new Set<NodeJS.Timeout>();
  let closed = false;

  const later = (ms: number, run: () => void): void => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      run();
    }, ms);
    timers.add(timer);
  };

  const send = (res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void => {
    if (res.headersSent || res.destroyed) return;
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    res.setHeader('Content-Length', Buffer.byteLength(body));
    res.statusCode = status;
    res.end(body);
  };
  const sendJson = (res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>) =>
    send(res, status, JSON.stringify(body), headers);
  const sendError = (res: ServerResponse, e: ApiError, headers?: Record<string, string>) =>
    sendJson(res, e.status, { error: e.error }, headers);

  /** The answer of an effect that happened, lost on its way: dropped, never sent, or a 500. */
  function loseAnswer(res: ServerResponse, fault: LostAnswerFault, headers: Record<string, string>): void {
    switch (fault) {
      case 'drop':
        res.socket?.destroy();
        return;
      case 'hang':
        return;
      case 'error':
        return sendJson(res, 500, INTERNAL_ERROR, headers);
    }
  }

  function authenticate(req: IncomingMessage): Account {
    const header = req.headers.authorization ?? '';
    let secret: string | undefined;
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header);
    const basic = /^Basic\s+(\S+)\s*$/i.exec(header);
    if (bearer) secret = bearer[1];
    else if (basic) secret = Buffer.from(basic[1], 'base64').toString('utf8').split(':')[0];
    if (!secret) {
      throw invalid(
        "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",
        undefined,
        undefined,
        401,
      );
    }
    const account = accounts.get(secret);
    if (!account) throw invalid(`Invalid API Key provided: ${maskSecret(secret)}`, undefined, undefined, 401);
    return account;
  }

  /** Records the event with a copy of the object as it is now, and hands it to webhook delivery. */
  function emit(cause: Cause, type: SimulatorEventType, object: PaymentIntent | Refund): void {
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
    webhooks.publish(cause.account.webhooks, event);
  }

  function recordIntent(account: Account, intent: PaymentIntent): void {
    account.intents.set(intent.id, { intent, refunded: 0 });
  }

  function succeed(cause: Cause, intent: PaymentIntent): void {
    intent.status = 'succeeded';
    intent.amount_received = intent.amount;
    intent.latest_charge ??= randomId('ch_', 24);
    emit(cause, 'payment_intent.succeeded', intent);
  }

  /** A failed attempt: the intent waits for another payment method, the caller gets the card error (402). */
  function fail(cause: Cause, intent: PaymentIntent, error: PaymentError): Outcome {
    intent.status = 'requires_payment_method';
    intent.last_payment_error = error;
    emit(cause, 'payment_intent.payment_failed', intent);
    return { status: 402, body: { error: { ...error, payment_intent: intent } }, save: true };
  }

  /** One confirmation attempt with the intent's payment method, from create (confirm=true) or /confirm. */
  function attempt(cause: Cause, intent: PaymentIntent, errorOnRequiresAction: boolean): Outcome {
    const behaviour = paymentMethod(cause.account, intent.payment_method);
    intent.last_payment_error = null;
    intent.next_action = null;
    switch (behaviour.kind) {
      case 'charge':
        succeed(cause, intent);
        return { status: 200, body: intent, save: true, fault: behaviour.fault };
      case 'processing':
        intent.status = 'processing';
        intent.latest_charge = randomId('ch_', 24);
        emit(cause, 'payment_intent.processing', intent);
        later(processingMs, () => {
          if (intent.status === 'processing') succeed({ account: cause.account, request: { id: null, idempotency_key: null } }, intent);
        });
        return { status: 200, body: intent, save: true };
      case 'authentication_required':
        if (errorOnRequiresAction) return fail(cause, intent, AUTHENTICATION_REQUIRED);
        intent.status = 'requires_action';
        intent.next_action = { type: 'use_stripe_sdk', use_stripe_sdk: { type: 'three_d_secure_redirect' } };
        emit(cause, 'payment_intent.requires_action', intent);
        return { status: 200, body: intent, save: true };
      case 'decline':
        return fail(cause, intent, { type: 'card_error', code: 'card_declined', decline_code: behaviour.decline_code, message: behaviour.message });
      case 'processing_error':
        return fail(cause, intent, PROCESSING_ERROR);
    }
  }

  /**
   * The intent's payment method: `payment_method`, or one made from a card token
   * (`payment_method_data`). Checked now; the returned function makes it (and
   * uses the token up) when the intent is created.
   */
  function intentMethod(account: Account, params: ParsedParams): () => string {
    const fromData = [...params.values.keys()].some((name) => name.startsWith('payment_method_data['));
    if (!fromData) {
      const method = requiredString(params, 'payment_method');
      paymentMethod(account, method);
      return () => method;
    }
    if (params.values.has('payment_method')) {
      throw invalid('You may only specify one of these parameters: payment_method, payment_method_data.', 'parameters_exclusive', 'payment_method_data');
    }
    const type = requiredString(params, 'payment_method_data[type]');
    if (type !== 'card') throw invalid(`Invalid payment_method_data[type]: ${type}. This network takes only card.`, undefined, 'payment_method_data[type]');
    const token = redeemToken(account.tokens, requiredString(params, TOKEN_PARAM), isTestMethod);
    return () => {
      token.spend();
      const id = stripeId('pm_');
      account.methods.set(id, token.method);
      return id;
    };
  }

  function createPaymentIntent(cause: Cause, params: ParsedParams): () => Outcome {
    const amount = integer(params, 'amount', 1, MAX_AMOUNT, 'amount_too_small');
    if (amount === undefined) throw invalid('Missing required param: amount.', 'parameter_missing', 'amount');
    const currency = checkCurrency(requiredString(params, 'currency'));
    checkMinimum(amount, currency);
    const method = intentMethod(cause.account, params);
    const confirm = boolean(params, 'confirm');
    const errorOnRequiresAction = boolean(params, 'error_on_requires_action');
    const description = params.values.get('description') ?? null;
    const metadata = checkMetadata(params.metadata);

    return () => {
      const intent: PaymentIntent = {
        id: randomId('pi_', 24),
        object: 'payment_intent',
        amount,
        amount_received: 0,
        currency,
        status: 'requires_confirmation',
        payment_method: method(),
        confirmation_method: 'automatic',
        description,
        metadata,
        created: unixSeconds(),
        latest_charge: null,
        last_payment_error: null,
        next_action: null,
        canceled_at: null,
        cancellation_reason: null,
        livemode: false,
      };
      recordIntent(cause.account, intent);
      if (!confirm) return { status: 200, body: intent, save: true };
      return attempt(cause, intent, errorOnRequiresAction);
    };
  }

  function intentRecord(account: Account, id: string): IntentRecord {
    const record = account.intents.get(id);
    if (!record) throw noSuch('payment_intent', id, 'intent', 404);
    return record;
  }

  function confirmPaymentIntent(cause: Cause, id: string, params: ParsedParams): () => Outcome {
    const { intent } = intentRecord(cause.account, id);
    const method = params.values.get('payment_method');
    if (method === '') throw emptyRefused('payment_method');
    if (method !== undefined) paymentMethod(cause.account, method);
    const errorOnRequiresAction = boolean(params, 'error_on_requires_action');
    if (intent.status === 'succeeded') {
      throw unexpectedState(intent, 'You cannot confirm this PaymentIntent because it has already succeeded after being previously confirmed.');
    }
    if (!CONFIRMABLE.includes(intent.status)) {
      throw unexpectedState(
        intent,
        `You cannot confirm this PaymentIntent because it has a status of ${intent.status}. Only a PaymentIntent with one of the following statuses may be confirmed: ${CONFIRMABLE.join(', ')}.`,
      );
    }
    return () => {
      if (method !== undefined) intent.payment_method = method;
      return attempt(cause, intent, errorOnRequiresAction);
    };
  }

  function cancelPaymentIntent(cause: Cause, id: string, params: ParsedParams): () => Outcome {
    const { intent } = intentRecord(cause.account, id);
    const reason = params.values.get('cancellation_reason');
    if (reason !== undefined && !CANCELLATION_REASONS.includes(reason)) {
      throw invalid(`Invalid cancellation_reason: must be one of ${CANCELLATION_REASONS.join(', ')}`, 'parameter_invalid_string', 'cancellation_reason');
    }
    if (!CANCELABLE.includes(intent.status)) {
      throw unexpectedState(
        intent,
        `You cannot cancel this PaymentIntent because it has a status of ${intent.status}. Only a PaymentIntent with one of the following statuses may be canceled: ${CANCELABLE.join(', ')}.`,
      );
    }
    return () => {
      intent.status = 'canceled';
      intent.canceled_at = unixSeconds();
      intent.cancellation_reason = reason ?? null;
      intent.next_action = null;
      emit(cause, 'payment_intent.canceled', intent);
      return { status: 200, body: intent, save: true };
    };
  }

  function createRefund(cause: Cause, params: ParsedParams): () => Outcome {
    const id = requiredString(params, 'payment_intent');
    const requested = integer(params, 'amount', 1, MAX_AMOUNT, 'amount_too_small');
    const metadata = checkMetadata(params.metadata);
    const record = cause.account.intents.get(id);
    if (!record) throw noSuch('payment_intent', id, 'payment_intent');
    const { intent } = record;
    if (intent.status !== 'succeeded') {
      throw invalid(
        `This PaymentIntent (${id}) does not have a successful charge to refund.`,
        'payment_intent_unexpected_state',
        'payment_intent',
      );
    }
    // A pending refund counts against what can be refunded, as Stripe's does; a failed one no longer.
    const remaining = intent.amount_received - record.refunded;
    if (remaining <= 0) throw invalid(`Charge ${intent.latest_charge} has already been refunded.`, 'charge_already_refunded');
    const amount = requested ?? remaining;
    if (amount > remaining) {
      throw invalid(
        `Refund amount (${amount}) is greater than unrefunded amount on charge (${remaining})`,
        'amount_too_large',
        'amount',
      );
    }
    const behaviour = paymentMethod(cause.account, intent.payment_method);
    const flow = behaviour.kind === 'charge' ? behaviour.refund : undefined;

    return () => {
      record.refunded += amount;
      const refund: Refund = {
        id: randomId('re_', 24),
        object: 'refund',
        amount,
        charge: intent.latest_charge,
        currency: intent.currency,
        payment_intent: id,
        status: flow === 'pending_then_succeeded' || flow === 'pending_then_failed' ? 'pending' : 'succeeded',
        metadata,
        created: unixSeconds(),
      };
      cause.account.refunds.set(refund.id, refund);
      emit(cause, 'refund.created', refund);
      if (flow) later(processingMs, () => settleRefund(cause.account, record, refund, flow === 'pending_then_succeeded' ? 'succeeded' : 'failed'));
      return { status: 200, body: refund, save: true };
    };
  }

  /**
   * The card network's later word on a refund, with no request behind it. A
   * failed refund gives its amount back: the charge can be refunded again.
   */
  function settleRefund(account: Account, record: IntentRecord, refund: Refund, status: 'succeeded' | 'failed'): void {
    const cause: Cause = { account, request: { id: null, idempotency_key: null } };
    refund.status = status;
    if (status === 'failed') {
      refund.failure_reason = 'declined';
      record.refunded -= refund.amount;
    }
    emit(cause, 'refund.updated', refund);
    if (status === 'failed') emit(cause, 'refund.failed', refund);
  }

  /** POST /v1/tokens: a token, or the 402 card_error of a card the network refuses (saved like a decline). */
  function createToken(cause: Cause, params: ParsedParams): () => Outcome {
    const make = prepareToken(params.values);
    return () => {
      const made = make(new Date());
      if ('error' in made) return { status: 402, body: made, save: true };
      cause.account.tokens.set(made.record.token.id, made.record);
      return { status: 200, body: made.record.token, save: true };
    };
  }

  /** Idempotency, execution on arrival, and the delayed (or lost) answer of one POST /v1/*. */
  function executePost(account: Account, pending: PendingPost, arrivedAt: number): void {
    const { res, path, params, key, requestId } = pending;
    const keyHeaders: Record<string, string> = key === undefined ? {} : { 'Idempotency-Key': key };
    const print = key === undefined ? '' : createHmac('sha256', fingerprintKey).update(fingerprint('POST', path, params)).digest('base64');
    if (key !== undefined) {
      const entry = account.keys.get(key);
      if (entry?.state === 'in_flight') {
        return sendJson(
          res,
          409,
          {
            error: {
              type: 'idempotency_error',
              code: 'idempotency_key_in_use',
              message: `There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): ${key}. Please try again later.`,
            },
          },
          keyHeaders,
        );
      }
      if (entry?.state === 'done' && entry.expiresAt > performance.now()) {
        if (entry.fingerprint !== print) {
          return sendJson(
            res,
            400,
            {
              error: {
                type: 'idempotency_error',
                message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
              },
            },
            keyHeaders,
          );
        }
        // A queued fault loses a replayed answer too: a network loses answers, not effects.
        const lost = takeFault(account, isLostAnswer);
        if (lost) return loseAnswer(res, lost, keyHeaders);
        return send(res, entry.status, entry.body, {
          ...keyHeaders,
          'Idempotent-Replayed': 'true',
          'Original-Request': entry.requestId,
        });
      }
    }

    let effect: () => Outcome;
    try {
      effect = pending.prepare({ account, request: { id: requestId, idempotency_key: key ?? null } });
    } catch (e) {
      if (e instanceof ApiError) return sendError(res, e, keyHeaders);
      throw e;
    }
    // A saved 500 stands in for the effect: nothing happens, and that answer is the one kept.
    const savedError = key !== undefined && takeFault(account, (f) => f === 'saved_error') !== undefined;
    const outcome: Outcome = savedError ? { status: 500, body: INTERNAL_ERROR, save: true } : effect();
    let fault = outcome.fault;
    if (outcome.save && fault === undefined && !savedError) fault = takeFault(account, isLostAnswer);
    if (key !== undefined) account.keys.set(key, { state: 'in_flight', fingerprint: print });
    // Serialized now: the answer tells the state at effect time, even if the intent moves on during the delay.
    const body = JSON.stringify(outcome.body);

    later(Math.max(0, arrivedAt + delayMs - performance.now()), () => {
      if (key !== undefined) {
        if (outcome.save) {
          account.keys.set(key, {
            state: 'done',
            fingerprint: print,
            status: outcome.status,
            body,
            requestId,
            expiresAt: performance.now() + ttlMs,
          });
        } else {
          account.keys.delete(key);
        }
      }
      if (fault) return loseAnswer(res, fault, keyHeaders);
      send(res, outcome.status, body, { ...keyHeaders, ...retryAdvice(outcome) });
    });
  }

  function handleControl(account: Account, req: IncomingMessage, res: ServerResponse, path: string, raw: string): void {
    const stats = () => ({
      held: account.held.size,
      holding: account.holding,
      pending_faults: account.faults.length,
      webhooks: account.webhooks.stats(),
    });
    const route = `${req.method ?? 'GET'} ${path}`;
    switch (route) {
      case 'POST /_simulator/faults': {
        const input = controlInput(req, raw);
        const fault = controlChoice(input, 'fault', FAULTS);
        const times = controlInteger(input, 'times', 1, 1, 10_000);
        for (let i = 0; i < times; i++) account.faults.push(fault);
        return sendJson(res, 200, { pending: account.faults, ...stats() });
      }
      case 'POST /_simulator/refusals': {
        const input = controlInput(req, raw);
        const status = Number(input.status);
        if (!(status in REFUSALS)) throw invalid('status must be one of 400, 401, 429', 'parameter_invalid', 'status');
        const times = controlInteger(input, 'times', 1, 1, 10_000);
        const after = controlInteger(input, 'after', 0, 0, 10_000);
        const param = input.param === undefined ? undefined : String(input.param);
        if (param !== undefined && (status !== 400 || !/^[a-z_[\]]{1,64}$/.test(param))) {
          throw invalid('param is for a 400 only: a parameter name (letters, _ and [])', 'parameter_invalid', 'param');
        }
        for (let i = 0; i < times; i++) account.refusals.push({ status: status as RefusalStatus, skip: i === 0 ? after : 0, param });
        return sendJson(res, 200, { refusals: account.refusals.length, ...stats() });
      }
      case 'DELETE /_simulator/faults':
        account.faults = [];
        account.refusals = [];
        return sendJson(res, 200, { pending: account.faults, ...stats() });
      case 'POST /_simulator/hold':
        account.holding = true;
        return sendJson(res, 200, stats());
      case 'POST /_simulator/release': {
        account.holding = false;
        const held = [...account.held];
        account.held.clear();
        const now = performance.now();
        for (const pending of held) executePost(account, pending, now);
        return sendJson(res, 200, { released: held.length, ...stats() });
      }
      case 'POST /_simulator/webhook-faults': {
        const input = controlInput(req, raw);
        const fault = controlChoice(input, 'fault', WEBHOOK_FAULTS);
        const times = controlInteger(input, 'times', 1, 1, 10_000);
        let pending: PendingWebhookFault;
        switch (fault) {
          case 'duplicate':
            pending = { fault: 'duplicate', copies: controlInteger(input, 'copies', 2, 1, 100) };
            break;
          case 'late':
            pending = { fault: 'late', delayMs: controlInteger(input, 'delay_ms', 5_000, 0, 3_600_000) };
            break;
          case 'out_of_order':
            pending = { fault: 'out_of_order' };
            break;
        }
        webhooks.addFault(account.webhooks, pending, times);
        return sendJson(res, 200, stats());
      }
      case 'DELETE /_simulator/webhook-faults':
        webhooks.clearFaults(account.webhooks);
        return sendJson(res, 200, stats());
      case 'POST /_simulator/webhooks/pause':
        webhooks.pause(account.webhooks);
        return sendJson(res, 200, stats());
      case 'POST /_simulator/webhooks/resume': {
        const resumed = webhooks.resume(account.webhooks);
        return sendJson(res, 200, { resumed, ...stats() });
      }
      case 'GET /_simulator/stats':
        return sendJson(res, 200, stats());
      default:
        throw notFound(req, path);
    }
  }

  function notFound(req: IncomingMessage, path: string): ApiError {
    return invalid(`Unrecognized request URL (${req.method}: ${path}).`, undefined, undefined, 404);
  }

  /** Validates a POST to /v1/* on arrival, then executes it now or holds it. */
  function acceptPost(
    account: Account,
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    params: ParsedParams,
    prepare: PendingPost['prepare'],
    arrivedAt: number,
    requestId: string,
  ): void {
    const header = req.headers['idempotency-key'];
    const key = Array.isArray(header) ? header.join(', ') : header;
    if (key !== undefined && (key.length === 0 || key.length > MAX_KEY_LENGTH)) {
      throw invalid(`Invalid Idempotency-Key: it must be 1 to ${MAX_KEY_LENGTH} characters long.`, 'idempotency_key_invalid');
    }
    const pending: PendingPost = { res, requestId, path, params, key, prepare };
    if (account.holding) {
      account.held.add(pending);
      res.once('close', () => account.held.delete(pending));
      return;
    }
    executePost(account, pending, arrivedAt);
  }

  function handle(req: IncomingMessage, res: ServerResponse, raw: string, arrivedAt: number, requestId: string): void {
    const account = authenticate(req);
    const url = new URL(req.url ?? '/', 'http://simulator.invalid');
    const path = url.pathname.length > 1 ? url.pathname.replace(/\/+$/, '') : url.pathname;
    const method = req.method ?? 'GET';
    if (path.startsWith('/_simulator/')) return handleControl(account, req, res, path, raw);
    const refusal = account.refusals[0];
    if (refusal && path.startsWith('/v1/')) {
      if (refusal.skip > 0) {
        refusal.skip--;
      } else {
        account.refusals.shift();
        // An answer a retry cannot change: the SDK does not resend it.
        const error = refusal.param ? { ...REFUSALS[400], param: refusal.param, message: `Invalid ${refusal.param} (refused by a simulator fault).` } : REFUSALS[refusal.status];
        return sendJson(res, refusal.status, { error }, { 'Stripe-Should-Retry': 'false' });
      }
    }
    const form = () => new URLSearchParams(raw);

    const action = /^\/v1\/payment_intents\/([^/]+)\/(confirm|cancel)$/.exec(path);
    if (action) {
      if (method !== 'POST') {
        res.setHeader('Allow', 'POST');
        throw invalid(`Method ${method} is not allowed on ${path}.`, undefined, undefined, 405);
      }
      const id = decodeURIComponent(action[1]);
      if (action[2] === 'confirm') {
        const params = parseParams(form(), CONFIRM_PARAMS, false);
        return acceptPost(account, req, res, path, params, (cause) => confirmPaymentIntent(cause, id, params), arrivedAt, requestId);
      }
      const params = parseParams(form(), CANCEL_PARAMS, false);
      return acceptPost(account, req, res, path, params, (cause) => cancelPaymentIntent(cause, id, params), arrivedAt, requestId);
    }

    if (path === '/v1/tokens' && method === 'POST') {
      const params = parseParams(form(), TOKEN_PARAMS, false);
      return acceptPost(account, req, res, path, params, (cause) => createToken(cause, params), arrivedAt, requestId);
    }
    const token = /^\/v1\/tokens\/([^/]+)$/.exec(path);
    if (token && method === 'GET') {
      parseParams(url.searchParams, [], false);
      const id = decodeURIComponent(token[1]);
      const found = account.tokens.get(id)?.token;
      if (!found) throw noSuch('token', id, 'id', 404);
      return sendJson(res, 200, found);
    }
    if (token || path === '/v1/tokens') {
      res.setHeader('Allow', token ? 'GET' : 'POST');
      throw invalid(`Method ${method} is not allowed on ${path}.`, undefined, undefined, 405);
    }

    const collection = /^\/v1\/(payment_intents|refunds|events)$/.exec(path);
    const single = /^\/v1\/(payment_intents|refunds|events)\/([^/]+)$/.exec(path);
    if (collection && method === 'POST' && collection[1] === 'payment_intents') {
      const params = parseParams(form(), PAYMENT_INTENT_PARAMS, true);
      return acceptPost(account, req, res, path, params, (cause) => createPaymentIntent(cause, params), arrivedAt, requestId);
    }
    if (collection && method === 'POST' && collection[1] === 'refunds') {
      const params = parseParams(form(), ['payment_intent', 'amount'], true);
      return acceptPost(account, req, res, path, params, (cause) => createRefund(cause, params), arrivedAt, requestId);
    }
    if (collection && method === 'GET') {
      switch (collection[1]) {
        case 'payment_intents': {
          const params = parseParams(url.searchParams, ['limit', 'starting_after'], false);
          const newestFirst = [...account.intents.values()].reverse().map((r) => r.intent);
          return sendJson(res, 200, paginate(newestFirst, params, '/v1/payment_intents', 'payment_intent'));
        }
        case 'refunds': {
          const params = parseParams(url.searchParams, ['limit', 'starting_after', 'payment_intent'], false);
          const intentId = params.values.get('payment_intent');
          if (intentId !== undefined && !account.intents.has(intentId)) throw noSuch('payment_intent', intentId, 'payment_intent');
          const newestFirst = [...account.refunds.values()]
            .reverse()
            .filter((r) => intentId === undefined || r.payment_intent === intentId);
          return sendJson(res, 200, paginate(newestFirst, params, '/v1/refunds', 'refund'));
        }
        case 'events': {
          const params = parseParams(url.searchParams, ['limit', 'starting_after', 'type'], false);
          const type = params.values.get('type');
          // Stripe's filter: an exact type, or a prefix with `*` (`payment_intent.*`).
          const matches = (t: string) => type === undefined || (type.endsWith('*') ? t.startsWith(type.slice(0, -1)) : t === type);
          const newestFirst = [...account.events.values()].reverse().filter((e) => matches(e.type));
          return sendJson(res, 200, paginate(newestFirst, params, '/v1/events', 'event'));
        }
      }
    }
    if (single && method === 'GET') {
      parseParams(url.searchParams, [], false);
      const id = decodeURIComponent(single[2]);
      const kind = single[1] === 'payment_intents' ? 'payment_intent' : single[1] === 'refunds' ? 'refund' : 'event';
      const found =
        kind === 'payment_intent' ? account.intents.get(id)?.intent : kind === 'refund' ? account.refunds.get(id) : account.events.get(id);
      if (!found) throw noSuch(kind, id, 'id', 404);
      return sendJson(res, 200, found);
    }
    if (collection || single) {
      res.setHeader('Allow', collection && collection[1] !== 'events' ? 'GET, POST' : 'GET');
      throw invalid(`Method ${method} is not allowed on ${path}.`, undefined, undefined, 405);
    }
    throw notFound(req, path);
  }

  const server = createServer((req, res) => {
    const arrivedAt = performance.now();
    const requestId = randomId('req_', 14);
    res.setHeader('Request-Id', requestId);
    res.setHeader('Content-Type', 'application/json');
    const header = req.headers['idempotency-key'];
    if (typeof header === 'string' && req.method === 'POST') res.setHeader('Idempotency-Key', header);

    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on('error', () => res.destroy());
    req.on('end', () => {
      if (closed) return void res.destroy();
      if (tooLarge) {
        res.setHeader('Connection', 'close');
        return sendError(res, invalid('Request body too large.', 'request_too_large', undefined, 413));
      }
      try {
        handle(req, res, Buffer.concat(chunks).toString('utf8'), arrivedAt, requestId);
      } catch (e) {
        if (e instanceof ApiError) return sendError(res, e);
        sendJson(res, 500, { error: { type: 'api_error', message: `Simulator bug: ${(e as Error).message}` } });
      }
    });
  });

  // Memory stays bounded: expired keys are dropped even if nobody asks for them again.
  const sweeper = setInterval(
    () => {
      const now = performance.now();
      for (const account of accounts.values()) {
        for (const [key, entry] of account.keys) {
          if (entry.state === 'done' && entry.expiresAt <= now) account.keys.delete(key);
        }
      }
    },
    Math.min(Math.max(ttlMs, 1_000), 60_000),
  );
  sweeper.unref();

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolveClose) => {
      closed = true;
      clearInterval(sweeper);
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      webhooks.close();
      for (const account of accounts.values()) account.held.clear();
      server.close(() => resolveClose());
      server.closeAllConnections();
    });
    return closing;
  };

  const host = options.host ?? '127.0.0.1';
  return new Promise<RunningSimulator>((resolveStart, reject) => {
    server.once('error', (e) => {
      clearInterval(sweeper);
      webhooks.close();
      reject(e);
    });
    server.listen(options.port ?? 0, host, () => {
      const { port } = server.address() as AddressInfo;
      const shownHost = host.includes(':') ? `[${host}]` : host;
      resolveStart({ url: `http://${shownHost}:${port}`, port, setWebhook: (target) => webhooks.setTarget(target), close });
    });
  });
}
