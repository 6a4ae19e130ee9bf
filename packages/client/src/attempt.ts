/**
 * One attempt: one request sent, its response body read, bounded by the
 * client's per-attempt timeout and by the caller's signal.
 */
import { MAX_TIMER_DELAY_MS } from './backoff';
import type { ClientSettings } from './client-options';
import type { NetworkFailure } from './errors';
import type { PreparedRequest } from './prepared-request';

/** What one attempt produced (a caller abort is thrown, not returned). */
export type AttemptOutcome = ResponseOutcome | { kind: NetworkFailure; error: unknown };

/** An attempt that got a whole response. */
export type ResponseOutcome = { kind: 'response'; status: number; statusText: string; headers: Headers; text: string };

/**
 * One request, response body included, bounded by `timeoutMs` and by the
 * caller's signal. Both abort the same controller; racing on it as well keeps
 * the abort prompt even with a `fetch` that ignores its signal.
 */
export async function attemptOnce(
  settings: Pick<ClientSettings, 'fetch' | 'timeoutMs'>,
  request: PreparedRequest,
  callerSignal: AbortSignal | undefined,
): Promise<AttemptOutcome> {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new DOMException(`The attempt timed out after ${settings.timeoutMs} ms`, 'TimeoutError'));
  }, Math.min(settings.timeoutMs, MAX_TIMER_DELAY_MS));
  const onCallerAbort = () => controller.abort(callerSignal?.reason);
  callerSignal?.addEventListener('abort', onCallerAbort, { once: true });
  const fetchImpl = settings.fetch;
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
