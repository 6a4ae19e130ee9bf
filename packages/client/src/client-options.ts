/**
 * What a caller gives the client and gets back, and the options checked once,
 * when the client is made, into the settings every request uses.
 */
import { DEFAULT_RETRY_STATUSES } from './backoff';

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

/** The options checked, every default applied. */
export type ClientSettings = Readonly<Required<Omit<IdempotentClientOptions, 'onRetry'>> & Pick<IdempotentClientOptions, 'onRetry'>>;

const DEFAULTS = {
  maxAttempts: 5,
  baseDelayMs: 200,
  maxDelayMs: 8000,
  timeoutMs: 10_000,
  maxRetryAfterMs: 60_000,
};

/** Checks the options (TypeError or RangeError naming the bad one) and applies the defaults. */
export function clientSettings(options: IdempotentClientOptions): ClientSettings {
  const baseUrl = checkBaseUrl(options.baseUrl);
  if (typeof options.apiKey !== 'string' || !/^[\x21-\x7e]+$/.test(options.apiKey)) {
    throw new TypeError('IdempotentClient: apiKey must be a non-empty string of printable ASCII characters');
  }
  return Object.freeze({
    baseUrl,
    apiKey: options.apiKey,
    maxAttempts: checkNumber('maxAttempts', options.maxAttempts ?? DEFAULTS.maxAttempts, { integer: true, min: 1 }),
    baseDelayMs: checkNumber('baseDelayMs', options.baseDelayMs ?? DEFAULTS.baseDelayMs, { min: 0 }),
    maxDelayMs: checkNumber('maxDelayMs', options.maxDelayMs ?? DEFAULTS.maxDelayMs, { min: 0 }),
    timeoutMs: checkNumber('timeoutMs', options.timeoutMs ?? DEFAULTS.timeoutMs, { min: 1 }),
    maxRetryAfterMs: checkNumber('maxRetryAfterMs', options.maxRetryAfterMs ?? DEFAULTS.maxRetryAfterMs, { min: 0 }),
    // A browser's fetch throws "Illegal invocation" when called as a method of
    // another object, hence the wrapper and the plain call in attemptOnce.
    fetch: options.fetch ?? ((url, init) => globalThis.fetch(url, init)),
    onRetry: options.onRetry,
    retryStatuses: Object.freeze([...(options.retryStatuses ?? DEFAULT_RETRY_STATUSES)]),
    random: options.random ?? Math.random,
    lookUpOutcome: options.lookUpOutcome ?? true,
  });
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
