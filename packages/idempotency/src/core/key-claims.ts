import { IdempotencyMetrics } from '../telemetry/idempotency.metrics';
import { ClaimRequest, ClaimResult } from '../contract/idempotency.store';
import { RequestWork } from './operation-attempt';
import { OneCommitAnswer, WAIT_SLICE_MS, runInOneCommit } from './one-commit-run';
import { RouteSettings } from './route-settings';

/**
 * The claim of a request's key: the store's claim (one round trip, committed
 * on its own), or for a route that commits once the unit that claims the key
 * and runs the request in the route's own transaction (runInOneCommit), which
 * comes back finished. A durable claim that fails is the request's outcome
 * (`failed`, with the store's error; a one-commit unit tells its own), then the
 * error goes on to the app.
 *
 * With `@Idempotent({ wait })`, while the answer says the key is in progress
 * and the wait (from now) allows: waits for the key to settle (the store's
 * settlement, e.g. LISTEN/NOTIFY), registered before asking again so that a
 * settlement in between is not missed, then asks again; the last answer
 * stands (a 409 when the time is up). A one-commit owner can end without
 * announcing it (a transaction whose connection dropped), so its waiters ask
 * again at least every WAIT_SLICE_MS.
 */
export async function claimOrWait(route: RouteSettings, request: ClaimRequest, metrics: IdempotencyMetrics, work: RequestWork): Promise<ClaimResult | OneCommitAnswer> {
  const { store, oneCommit, waitMs } = route;
  const ask = oneCommit ? () => runInOneCommit({ store, oneCommit, waitMs }, request, metrics, work) : () => store.claim(request);
  try {
    let answer = await ask();
    const { settlement } = store;
    if (answer.kind !== 'in_progress' || waitMs <= 0 || !settlement) return answer;
    const sliceMs = oneCommit ? WAIT_SLICE_MS : Infinity;
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
  } catch (error) {
    if (!oneCommit) metrics.record('failed', error);
    throw error;
  }
}
