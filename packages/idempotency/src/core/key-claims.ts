import { IdempotencyMetrics } from '../telemetry/idempotency.metrics';
import { ClaimRequest, ClaimResult, IdempotencyStore, KeySettlement, ScopedKey } from '../contract/idempotency.store';

/**
 * The claim of a request's key (one store round trip), and
 * with `@Idempotent({ wait })` the wait for an owner still at work
 * (askAgainWhileInProgress). A claim that fails is the request's outcome
 * (`failed`, with the store's error), then the error goes on to the app.
 */
export async function claimOrWait(store: IdempotencyStore, request: ClaimRequest, waitMs: number, metrics: IdempotencyMetrics): Promise<ClaimResult> {
  const ask = () => store.claim(request);
  try {
    return await askAgainWhileInProgress(await ask(), store.settlement, request, waitMs, ask);
  } catch (error) {
    metrics.record('failed', error);
    throw error;
  }
}

/**
 * While `answer` says the key is in progress and `waitMs` (from now) allows:
 * waits for the key to settle (the store's settlement, e.g. LISTEN/NOTIFY),
 * registered before asking again so that a settlement in between is not
 * missed, then asks again; the last answer stands (a 409 when the time is
 * up). `sliceMs` bounds each wait, for an owner that can end without
 * announcing it (a one-commit transaction whose connection dropped).
 */
export async function askAgainWhileInProgress<A extends { kind: string }>(
  answer: A,
  settlement: KeySettlement | undefined,
  request: ScopedKey,
  waitMs: number,
  ask: () => Promise<A>,
  sliceMs = Infinity,
): Promise<A> {
  if (answer.kind !== 'in_progress' || waitMs <= 0 || !settlement) return answer;
  const deadline = performance.now() + waitMs;
  while (answer.kind === 'in_progress' && performance.now() < deadline) {
    const waiting = settlement.awaitSettled(request, Math.min(deadline - performance.now(), sliceMs));
    try {
      answer = await ask();
    } catch (error) {
      waiting.cancel();
      throw error;
    }
    if (answer.kind !== 'in_progress') {
      waiting.cancel();
      break;
    }
    await waiting.settled;
    answer = await ask();
  }
  return answer;
}
