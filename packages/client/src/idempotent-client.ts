/**
 * A retrying HTTP client for the payments API. The invariant it protects: one
 * operation = one Idempotency-Key = one body, whatever happens on the wire.
 *
 * `post()` mints the key and serialises the body exactly once, freezes both into
 * a PreparedRequest (prepared-request.ts), and hands that to `sendWithRetries()`
 * (retry-loop.ts). The retry loop takes the request as a parameter and has no
 * way to make a key or re-serialise, so a retry can only ever be a replay of the
 * same request: the server then answers with the original outcome
 * (Idempotent-Replayed: true) instead of a second charge.
 *
 * No Nest, no `node:` imports: it is the package `@safe-retries/client` and runs
 * in Node 20+ and browsers (fetch, AbortController, setTimeout, Web Crypto).
 */
import type { KeyOutcome } from './api-types';
import { isRetryableStatus } from './backoff';
import { clientSettings, type ClientResponse, type ClientSettings, type GetOptions, type IdempotentClientOptions, type PostOptions } from './client-options';
import { NetworkError, ProblemError } from './errors';
import { keyOutcomePath, lookUpOutcome } from './key-outcome';
import { newIdempotencyKey } from './keys';
import { prepareGet, preparePost } from './prepared-request';
import { sendWithRetries } from './retry-loop';

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
  private readonly settings: ClientSettings;

  constructor(options: IdempotentClientOptions) {
    this.settings = clientSettings(options);
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
    const request = preparePost(this.settings, path, body, key);
    try {
      return await sendWithRetries<T>(this.settings, request, options.signal);
    } catch (error) {
      const gaveUp = error instanceof NetworkError || (error instanceof ProblemError && isRetryableStatus(error.status, this.settings.retryStatuses));
      if (this.settings.lookUpOutcome && gaveUp && !options.signal?.aborted) error.outcome = await lookUpOutcome(this.settings, key);
      throw error;
    }
  }

  /**
   * `GET /idempotency-keys/{key}`: where the operation sent with `key` stands
   * (unknown, in progress, or completed with its status), without running it.
   */
  async outcome(key: string, options: GetOptions = {}): Promise<ClientResponse<KeyOutcome>> {
    return this.get<KeyOutcome>(keyOutcomePath(key), options);
  }

  /**
   * GETs `path`, retrying on the same rules as {@link IdempotentClient.post}
   * (a GET is safe to repeat, so it carries no key).
   */
  async get<T = unknown>(path: string, options: GetOptions = {}): Promise<ClientResponse<T>> {
    return sendWithRetries<T>(this.settings, prepareGet(this.settings, path), options.signal);
  }
}
