/**
 * A retrying HTTP client for the payments API. The invariant it protects: one
 * operation = one Idempotency-Key = one body, whatever happens on the wire.
 *
 * `post()` mints the key and serialises the body exactly once, freezes both into
 * a PreparedRequest, and hands that to `sendWithRetries()`. The retry loop takes
 * the request as a parameter and has no way to make a key or re-serialise, so a
 * retry can only ever be a replay of the same request: the server then answers
 * with the original outcome (Idempotent-Replayed: true) instead of a second charge.
 *
 * No Nest, no `node:` imports: it ships as the `./client` package export and runs
 * in Node 20+ and browsers (fetch, AbortController, setTimeout, Web Crypto).
 */
import { backoffDelay, DEFAULT_RETRY_STATUSES, isRetryableStatus, MAX_TIMER_DELAY_MS, parseRetryAfter } from './backoff';
import { INVALID_RESPONSE_CODE, NetworkError, ProblemError, UNKNOWN_PROBLEM_CODE, type NetworkFailure } from './errors';
import { invalidKeyReason, newIdempotencyKey } from './keys';
import type { KeyOutcome } from './api-types';

/** The subset of `fetch` the client uses; `globalThis.fetch` fits. */
export type FetchLike = (url: string, init: RequestInit) => Promise<Response>;

/** Why an attempt is being retried. */
export type RetryReason = 'network' | 'timeout' | 'status';

/** Passed to `onRetry` before each wait. */
export interface RetryEvent {
  /** The attempt that just failed, counting from 1; the next one is `attempt + 1`. */
  attempt: number;
  /** How long the client will wait before the next attempt. */
  delayMs: number;
  reason: RetryReason;
  /** The response status, when `reason` is `status`. */
  status?: number;
  /** The failure, when `reason` is `network` or `timeout`. */
  error?: unknown;
}

export interface IdempotentClientOptions {
  /** e.g. `https://api.example.com/v1`; request paths are appended to it. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey: string;
  /** Requests per operation, the first included. Default 5. */
  maxAttempts?: number;
  /** Backoff base: the first retry waits up to this long. Default 200 ms. */
  baseDelayMs?: number;
  /** Backoff ceiling. Default 8000 ms. */
  maxDelayMs?: number;
  /** Per-attempt timeout, covering the response body too; retried like a network error. Default 10000 ms. */
  timeoutMs?: number;
  /**
   * Ceiling on a server's `Retry-After`. The header overrides the backoff (and may
   * exceed `maxDelayMs`), but a misconfigured server must not park a caller for
   * an hour. Default 60000 ms.
   */
  maxRetryAfterMs?: number;
  /** Defaults to `globalThis.fetch`, looked up at call time. */
  fetch?: FetchLike;
  /**
   * Called before each wait. Throwing from it stops retrying: the operation
   * rejects with that error.
   */
  onRetry?: (event: RetryEvent) => void;
  /** Statuses to retry. Default 409, 429, 502, 503, 504. */
  retryStatuses?: readonly number[];
  /** Source of jitter in [0, 1). Default `Math.random`. */
  random?: () => number;
  /**
   * After a POST gives up (no response, or a retryable status on its last
   * attempt), ask `GET /idempotency-keys/{key}` once where its operation
   * stands and put the answer on the error as `outcome`. Default true.
   */
  lookUpOutcome?: boolean;
}

/** Options of one POST operation. */
export interface PostOptions {
  /**
   * The operation's key, reused on every attempt. Default: a new random UUID per
   * call. Pass one (stored, or from `keyFor`) when you may call again for the same
   * operation after this call has given up.
   */
  idempotencyKey?: string;
  /** Aborting rejects promptly with the signal's reason, in flight or while waiting. */
  signal?: AbortSignal;
}

/** Options of one GET. */
export interface GetOptions {
  signal?: AbortSignal;
}

/** A successful (2xx) response. */
export interface ClientResponse<T = unknown> {
  status: number;
  /** Parsed JSON when the content type is JSON, the text otherwise, `undefined` when empty. */
  body: T;
  headers: Headers;
  /** True when the server replayed a stored response (`Idempotent-Replayed: true`). */
  replayed: boolean;
  /** How many requests were sent. */
  attempts: number;
}

/** One request, fixed before the first attempt and identical on every attempt. */
interface PreparedRequest {
  readonly method: 'GET' | 'POST';
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string | undefined;
  readonly idempotencyKey: string | undefined;
}

/** What one attempt produced (a caller abort is thrown, not returned). */
type AttemptOutcome =
  | { kind: 'response'; status: number; statusText: string; headers: Headers; text: string }
  | { kind: NetworkFailure; error: unknown };

const DEFAULTS = {
  maxAttempts: 5,
  baseDelayMs: 200,
  maxDelayMs: 8000,
  timeoutMs: 10_000,
  maxRetryAfterMs: 60_000,
};

/**
 * A client that makes POSTs exactly-once with an Idempotency-Key and retries
 * transient failures (network errors, per-attempt timeouts, 409/429/502/503/504)
 * with exponential backoff and full jitter, honouring `Retry-After`.
 *
 * @example
 * ```ts
 * const client = new IdempotentClient({ baseUrl: 'https://api.example.com', apiKey });
 * const { body, replayed } = await client.post('/payments', { amount: 1250, currency: 'EUR', source: 'tok_visa' });
 * ```
 */
export class IdempotentClient {
  private readonly baseUrl: string;
  private readonly apiKey: string;
  private readonly maxAttempts: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly timeoutMs: number;
  private readonly maxRetryAfterMs: number;
  private readonly fetchImpl: FetchLike;
  private readonly onRetry: ((event: RetryEvent) => void) | undefined;
  private readonly retryStatuses: readonly number[];
  private readonly random: () => number;
  private readonly lookUpOutcome: boolean;

  constructor(options: IdempotentClientOptions) {
    this.baseUrl = checkBaseUrl(options.baseUrl);
    if (typeof options.apiKey !== 'string' || !/^[\x21-\x7e]+$/.test(options.apiKey)) {
      throw new TypeError('IdempotentClient: apiKey must be a non-empty string of printable ASCII characters');
    }
    this.apiKey = options.apiKey;
    this.maxAttempts = checkNumber('maxAttempts', options.maxAttempts ?? DEFAULTS.maxAttempts, { integer: true, min: 1 });
    this.baseDelayMs = checkNumber('baseDelayMs', options.baseDelayMs ?? DEFAULTS.baseDelayMs, { min: 0 });
    this.maxDelayMs = checkNumber('maxDelayMs', options.maxDelayMs ?? DEFAULTS.maxDelayMs, { min: 0 });
    this.timeoutMs = checkNumber('timeoutMs', options.timeoutMs ?? DEFAULTS.timeoutMs, { min: 1 });
    this.maxRetryAfterMs = checkNumber('maxRetryAfterMs', options.maxRetryAfterMs ?? DEFAULTS.maxRetryAfterMs, { min: 0 });
    // A browser's fetch throws "Illegal invocation" when called as a method of
    // another object, hence the wrapper and the plain call in attemptOnce.
    this.fetchImpl = options.fetch ?? ((url, init) => globalThis.fetch(url, init));
    this.onRetry = options.onRetry;
    this.retryStatuses = Object.freeze([...(options.retryStatuses ?? DEFAULT_RETRY_STATUSES)]);
    this.random = options.random ?? Math.random;
    this.lookUpOutcome = options.lookUpOutcome ?? true;
  }

  /**
   * POSTs `body` as JSON with an Idempotency-Key, retrying transient failures
   * with the same key and the same bytes.
   *
   * @throws {@link ProblemError} on a non-retryable error status, or a retryable one on the last attempt.
   * @throws {@link NetworkError} when the last attempt got no response.
   * @throws the signal's reason when `options.signal` aborts.
   */
  async post<T = unknown>(path: string, body: unknown, options: PostOptions = {}): Promise<ClientResponse<T>> {
    const key = options.idempotencyKey ?? newIdempotencyKey();
    const reason = invalidKeyReason(key);
    if (reason) throw new TypeError(`Invalid idempotency key: ${reason}`);
    const serialized = JSON.stringify(body);
    if (serialized === undefined) throw new TypeError('The request body cannot be serialised to JSON');
    const request: PreparedRequest = Object.freeze({
      method: 'POST',
      url: this.urlFor(path),
      headers: Object.freeze({
        Authorization: `Bearer ${this.apiKey}`,
        Accept: 'application/json',
        'Content-Type': 'application/json',
        'Idempotency-Key': key,
      }),
      body: serialized,
      idempotencyKey: key,
    });
    try {
      return await this.sendWithRetries<T>(request, options.signal);
    } catch (error) {
      const gaveUp = error instanceof NetworkError || (error instanceof ProblemError && isRetryableStatus(error.status, this.retryStatuses));
      if (this.lookUpOutcome && gaveUp && !options.signal?.aborted) error.outcome = await this.lookUp(key);
      throw error;
    }
  }

  /**
   * `GET /idempotency-keys/{key}`: where the operation sent with `key` stands
   * (unknown, in progress, or completed with its status), without running it.
   */
  async outcome(key: string, options: GetOptions = {}): Promise<ClientResponse<KeyOutcome>> {
    return this.get<KeyOutcome>(`/idempotency-keys/${encodeURIComponent(key)}`, options);
  }

  /** One attempt at the outcome after giving up: a server that did not answer the POST is not waited for again. */
  private async lookUp(key: string): Promise<KeyOutcome | undefined> {
    const answer = await this.attemptOnce(
      {
        method: 'GET',
        url: this.urlFor(`/idempotency-keys/${encodeURIComponent(key)}`),
        headers: { Authorization: `Bearer ${this.apiKey}`, Accept: 'application/json' },
        body: undefined,
        idempotencyKey: undefined,
      },
      undefined,
    );
    if (answer.kind !== 'response' || answer.status !== 200) return undefined;
    try {
      return JSON.parse(answer.text) as KeyOutcome;
    } catch {
      return undefined;
    }
  }

  /**
   * GETs `path`, retrying on the same rules as {@link IdempotentClient.post}
   * (a GET is safe to repeat, so it carries no key).
   */
  async get<T = unknown>(path: string, options: GetOptions = {}): Promise<ClientResponse<T>> {
    const request: PreparedRequest = Object.freeze({
      method: 'GET',
      url: this.urlFor(path),
      headers: Object.freeze({ Authorization: `Bearer ${this.apiKey}`, Accept: 'application/json' }),
      body: undefined,
      idempotencyKey: undefined,
    });
    return this.sendWithRetries<T>(request, options.signal);
  }

  /** The retry loop. It only ever resends `request` as prepared. */
  private async sendWithRetries<T>(request: PreparedRequest, signal: AbortSignal | undefined): Promise<ClientResponse<T>> {
    for (let attempt = 1; ; attempt++) {
      signal?.throwIfAborted();
      const outcome = await this.attemptOnce(request, signal);
      const isLast = attempt >= this.maxAttempts;

      if (outcome.kind === 'response') {
        if (outcome.status >= 200 && outcome.status < 300) return toClientResponse<T>(outcome, attempt, request);
        if (isLast || !isRetryableStatus(outcome.status, this.retryStatuses)) {
          throw toProblemError(outcome, attempt, request);
        }
        const retryAfter = parseRetryAfter(outcome.headers.get('Retry-After'));
        const delayMs =
          retryAfter !== undefined ? Math.min(retryAfter, this.maxRetryAfterMs) : this.backoff(attempt);
        this.onRetry?.({ attempt, delayMs, reason: 'status', status: outcome.status });
        await sleep(delayMs, signal);
        continue;
      }

      if (isLast) {
        throw new NetworkError({
          cause: outcome.error,
          reason: outcome.kind,
          attempts: attempt,
          idempotencyKey: request.idempotencyKey,
        });
      }
      const delayMs = this.backoff(attempt);
      this.onRetry?.({ attempt, delayMs, reason: outcome.kind, error: outcome.error });
      await sleep(delayMs, signal);
    }
  }

  /**
   * One request, response body included, bounded by `timeoutMs` and by the
   * caller's signal. Both abort the same controller; racing on it as well keeps
   * the abort prompt even with a `fetch` that ignores its signal.
   */
  private async attemptOnce(request: PreparedRequest, callerSignal: AbortSignal | undefined): Promise<AttemptOutcome> {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new DOMException(`The attempt timed out after ${this.timeoutMs} ms`, 'TimeoutError'));
    }, Math.min(this.timeoutMs, MAX_TIMER_DELAY_MS));
    const onCallerAbort = () => controller.abort(callerSignal?.reason);
    callerSignal?.addEventListener('abort', onCallerAbort, { once: true });
    const fetchImpl = this.fetchImpl;
    try {
      const response = await raceAbort(
        fetchImpl(request.url, {
          method: request.method,
          headers: { ...request.headers },
          body: request.body,
          signal: controller.signal,
        }),
        controller.signal,
      );
      const text = await raceAbort(response.text(), controller.signal);
      return { kind: 'response', status: response.status, statusText: response.statusText, headers: response.headers, text };
    } catch (error) {
      if (callerSignal?.aborted) throw callerSignal.reason;
      return { kind: timedOut ? 'timeout' : 'network', error };
    } finally {
      clearTimeout(timer);
      callerSignal?.removeEventListener('abort', onCallerAbort);
    }
  }

  /** The wait after failed attempt number `attempt` (1-based): retry number `attempt - 1`. */
  private backoff(attempt: number): number {
    return backoffDelay(attempt - 1, this.baseDelayMs, this.maxDelayMs, this.random);
  }

  /**
   * Appends `path` to the base URL. Not `new URL(path, base)`, which would drop
   * the base's own path (`/v1`) for an absolute path.
   */
  private urlFor(path: string): string {
    if (/^[a-z][a-z\d+.-]*:/i.test(path) || path.startsWith('//')) {
      throw new TypeError(`Expected a path relative to baseUrl, got "${path}"`);
    }
    return `${this.baseUrl}/${path.replace(/^\/+/, '')}`;
  }
}

function checkBaseUrl(baseUrl: string): string {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new TypeError(`IdempotentClient: baseUrl is not an absolute URL: "${baseUrl}"`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new TypeError(`IdempotentClient: baseUrl must be http(s), got "${url.protocol}"`);
  }
  if (url.search || url.hash) throw new TypeError('IdempotentClient: baseUrl must not have a query or a fragment');
  return url.href.replace(/\/+$/, '');
}

function checkNumber(name: string, value: number, rule: { min: number; integer?: boolean }): number {
  const ok = typeof value === 'number' && !Number.isNaN(value) && value >= rule.min && (!rule.integer || Number.isInteger(value));
  if (!ok) {
    throw new RangeError(`IdempotentClient: ${name} must be ${rule.integer ? 'an integer' : 'a number'} >= ${rule.min}, got ${value}`);
  }
  return value;
}

/** Rejects with the signal's reason as soon as it aborts, whatever `promise` does. */
function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    // Settling after an abort is a no-op, and the handlers keep a late rejection handled.
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** Waits `ms`, or rejects with the signal's reason as soon as it aborts (clearing the timer). */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, Math.min(ms, MAX_TIMER_DELAY_MS));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

type ResponseOutcome = Extract<AttemptOutcome, { kind: 'response' }>;

function isJson(headers: Headers): boolean {
  const mediaType = (headers.get('Content-Type') ?? '').split(';')[0].trim().toLowerCase();
  return mediaType === 'application/json' || mediaType.endsWith('+json');
}

/** `{ ok: false }` when the body claims to be JSON and is not. */
function parseBody(outcome: ResponseOutcome): { ok: true; value: unknown } | { ok: false } {
  if (outcome.text === '') return { ok: true, value: undefined };
  if (!isJson(outcome.headers)) return { ok: true, value: outcome.text };
  try {
    return { ok: true, value: JSON.parse(outcome.text) as unknown };
  } catch {
    return { ok: false };
  }
}

function toClientResponse<T>(outcome: ResponseOutcome, attempts: number, request: PreparedRequest): ClientResponse<T> {
  const parsed = parseBody(outcome);
  if (!parsed.ok) {
    // The operation succeeded but we cannot read its result; a retry would replay
    // the same bytes, so report it, with the status, rather than loop.
    throw new ProblemError({
      type: 'about:blank',
      title: 'Invalid Response',
      status: outcome.status,
      detail: 'The response claims to be JSON but could not be parsed.',
      code: INVALID_RESPONSE_CODE,
      body: outcome.text,
      headers: outcome.headers,
      attempts,
      idempotencyKey: request.idempotencyKey,
    });
  }
  return {
    status: outcome.status,
    body: parsed.value as T,
    headers: outcome.headers,
    replayed: outcome.headers.get('Idempotent-Replayed')?.trim().toLowerCase() === 'true',
    attempts,
  };
}

function toProblemError(outcome: ResponseOutcome, attempts: number, request: PreparedRequest): ProblemError {
  const parsed = parseBody(outcome);
  const body = parsed.ok ? parsed.value : outcome.text;
  const problem: Record<string, unknown> = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  const text = (field: string): string | undefined => (typeof problem[field] === 'string' ? (problem[field] as string) : undefined);
  return new ProblemError({
    type: text('type') ?? 'about:blank',
    title: text('title') ?? (outcome.statusText || `HTTP ${outcome.status}`),
    status: outcome.status,
    detail: text('detail'),
    code: text('code') ?? UNKNOWN_PROBLEM_CODE,
    body,
    headers: outcome.headers,
    attempts,
    idempotencyKey: request.idempotencyKey,
  });
}
