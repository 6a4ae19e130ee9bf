/**
 * The retry loop: it takes a PreparedRequest and only ever resends it as
 * prepared, waiting between attempts with exponential backoff and full jitter,
 * or as long as the server's `Retry-After` says (up to `maxRetryAfterMs`).
 */
import { attemptOnce } from './attempt';
import { backoffDelay, isRetryableStatus, MAX_TIMER_DELAY_MS, parseRetryAfter } from './backoff';
import type { ClientResponse, ClientSettings } from './client-options';
import { NetworkError } from './errors';
import type { PreparedRequest } from './prepared-request';
import { toClientResponse, toProblemError } from './responses';

/** Sends `request` until it gets a 2xx, a status not to retry, or its last attempt ends. */
export async function sendWithRetries<T>(settings: ClientSettings, request: PreparedRequest, signal: AbortSignal | undefined): Promise<ClientResponse<T>> {
  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    const outcome = await attemptOnce(settings, request, signal);
    const isLast = attempt >= settings.maxAttempts;

    if (outcome.kind === 'response') {
      if (outcome.status >= 200 && outcome.status < 300) return toClientResponse<T>(outcome, attempt, request);
      if (isLast || !isRetryableStatus(outcome.status, settings.retryStatuses)) {
        throw toProblemError(outcome, attempt, request);
      }
      const retryAfter = parseRetryAfter(outcome.headers.get('Retry-After'));
      const delayMs = retryAfter !== undefined ? Math.min(retryAfter, settings.maxRetryAfterMs) : backoff(settings, attempt);
      settings.onRetry?.({ attempt, delayMs, reason: 'status', status: outcome.status });
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
    const delayMs = backoff(settings, attempt);
    settings.onRetry?.({ attempt, delayMs, reason: outcome.kind, error: outcome.error });
    await sleep(delayMs, signal);
  }
}

/** The wait after failed attempt number `attempt` (1-based): retry number `attempt - 1`. */
function backoff(settings: ClientSettings, attempt: number): number {
  return backoffDelay(attempt - 1, settings.baseDelayMs, settings.maxDelayMs, settings.random);
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
