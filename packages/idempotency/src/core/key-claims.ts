import { Logger } from '@nestjs/common';
import { IdempotencyMetrics } from '../telemetry/idempotency.metrics';
import { ClaimRequest, ClaimResult, IdempotencyStore, KeySettlement, ScopedKey } from '../contract/idempotency.store';
import { inSpan } from '../telemetry/idempotency.telemetry';

/**
 * The claim of a request's key (one store round trip, timed in
 * `idempotency_claim_duration_seconds`, in the `idempotency.claim` span), and
 * with `@Idempotent({ wait })` the wait for an owner still at work
 * (askAgainWhileInProgress). A claim that fails is the request's outcome
 * (`failed`, with the store's error), then the error goes on to the app.
 */
export async function claimOrWait(store: IdempotencyStore, request: ClaimRequest, waitMs: number, metrics: IdempotencyMetrics): Promise<ClaimResult> {
  const ask = () => timedClaim(metrics, () => store.claim(request));
  try {
    return await askAgainWhileInProgress(await inSpan('idempotency.claim', ask), store.settlement, request, waitMs, ask);
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

/** A claim, timed in `idempotency_claim_duration_seconds`. */
export async function timedClaim(metrics: IdempotencyMetrics, claim: () => Promise<ClaimResult>): Promise<ClaimResult> {
  const started = process.hrtime.bigint();
  const result = await claim();
  metrics.claimDuration.observe(Number(process.hrtime.bigint() - started) / 1e9);
  return result;
}

const logger = new Logger('Idempotency');

/** Wakes the duplicates waiting for a key (after its completion or release committed); a failure is logged, not thrown. */
export function announceSettled(store: IdempotencyStore, owner: ScopedKey): void {
  store.settlement?.announceSettled(owner).catch((error: unknown) => {
    logger.warn(`could not wake the requests waiting for a key: ${(error as Error).message}`);
  });
}
