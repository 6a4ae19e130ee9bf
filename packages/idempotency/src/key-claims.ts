import { IdempotencyMetrics } from './idempotency.metrics';
import { ClaimRequest, ClaimResult, IdempotencyStore } from './idempotency.store';
import { inSpan } from './idempotency.telemetry';

/**
 * The claim of a request's key (one store round trip, timed in
 * `idempotency_claim_duration_seconds`, in the `idempotency.claim` span), and
 * with `@Idempotent({ wait })` the wait for an owner still at work: wait for
 * its key to settle (the store's settlement, e.g. LISTEN/NOTIFY), then ask
 * again, until it is no longer in progress or the time is up (then the last
 * answer, 409, stands).
 */
export async function claimOrWait(store: IdempotencyStore, request: ClaimRequest, waitMs: number, metrics: IdempotencyMetrics): Promise<ClaimResult> {
  let claim = await inSpan('idempotency.claim', () => claimOnce(store, request, metrics));
  const { settlement } = store;
  if (claim.kind !== 'in_progress' || waitMs <= 0 || !settlement) return claim;
  const deadline = performance.now() + waitMs;
  while (claim.kind === 'in_progress' && performance.now() < deadline) {
    // Registered before asking again: a settlement in between is not missed.
    const waiting = settlement.awaitSettled(request.scope, request.key, deadline - performance.now());
    claim = await claimOnce(store, request, metrics);
    if (claim.kind !== 'in_progress') {
      waiting.cancel();
      break;
    }
    await waiting.settled;
    claim = await claimOnce(store, request, metrics);
  }
  return claim;
}

async function claimOnce(store: IdempotencyStore, request: ClaimRequest, metrics: IdempotencyMetrics): Promise<ClaimResult> {
  const started = process.hrtime.bigint();
  const claim = await store.claim(request);
  metrics.claimDuration.observe(Number(process.hrtime.bigint() - started) / 1e9);
  return claim;
}
