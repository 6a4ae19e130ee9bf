import { Logger } from '@nestjs/common';
import { LeaseLostError } from '../contract/idempotency.errors';
import { IdempotencyMetrics } from '../telemetry/idempotency.metrics';
import { ClaimRequest, ClaimResult, IdempotencyStore, OneCommitKeys, StoredResponse } from '../contract/idempotency.store';
import { IDEMPOTENT_OUTCOME, isIdempotentOutcome } from '../contract/idempotent-outcome';
import { AttemptAnswer, RequestWork } from './operation-attempt';

/**
 * How a request of a one-commit route ended: the claim's answer when it did
 * not claim (replay, another request, in progress), its response committed
 * with its writes, or `lease_lost`: it ran past its lease, so the store ended
 * its transaction and nothing of it committed.
 */
export type OneCommitAnswer = Exclude<ClaimResult, { kind: 'claimed' }> | AttemptAnswer;

interface OneCommitRoute {
  store: IdempotencyStore;
  oneCommit: OneCommitKeys;
  waitMs: number;
}

/** The claim lost the final insert: this many more claims read what the winner stored. */
const CLAIMS_AFTER_A_LOST_INSERT = 1;
/** A duplicate that waits asks again at least this often (a missed wake-up costs no more). */
export const WAIT_SLICE_MS = 1_000;

const logger = new Logger('Idempotency');

/**
 * The request path of a route that commits once (`commit: 'one'`), beside the
 * durable one (OperationAttempt): one unit of the store, in which
 *
 *   claim (first statement) -> not claimed: its answer (the unit ends, nothing written)
 *                           -> claimed: pipes + handler; the key with its response (last
 *                              statement); COMMIT: one commit for the key and the writes
 *
 * - Any error rolls the unit back: the handler's writes and the claim go
 *   together (the release is the rollback); the error goes on to the app.
 * - A business outcome (IdempotentOutcome) is stored as the response, and the
 *   unit commits, as on the durable path.
 * - The final insert lost to a row the claim could not see (the store's fence,
 *   e.g. against a durable claim of the same key): everything rolls back and
 *   the key is claimed again, which now reads the winner's response (a replay) or another request (422); that
 *   answer is the request's one outcome (the lost unit claimed nothing).
 * - The lease bounds the unit: the store ends it past the lease, so an owner
 *   paused that long cannot commit (answered `lease_lost`), and its key is free
 *   the moment the unit ends.
 * - `wait`: an owner announces its key once its unit has ended, for the
 *   duplicates that wait for it (claimOrWait).
 */
export async function runInOneCommit(route: OneCommitRoute, request: ClaimRequest, metrics: IdempotencyMetrics, work: RequestWork): Promise<OneCommitAnswer> {
  let answer: OneCommitAnswer | { kind: 'lost_insert' } = { kind: 'lost_insert' };
  // The first unit, and one more for each insert lost (up to CLAIMS_AFTER_A_LOST_INSERT).
  for (let units = 0; answer.kind === 'lost_insert' && units <= CLAIMS_AFTER_A_LOST_INSERT; units++) answer = await attempt(route, request, metrics, work);
  return answer.kind === 'lost_insert' ? { kind: 'in_progress', retryAfterMs: WAIT_SLICE_MS } : answer;
}

/**
 * One unit: the claim, and when it claims, the work and the key's insert.
 * A request has one answer: a unit whose insert lost tells nothing (the key
 * was another's all along; the next claim's answer is the request's), so a
 * claim is told once its unit has ended, committed or rolled back with its
 * error. A unit that fails before it claims tells `failed`, with the error.
 */
async function attempt(
  route: OneCommitRoute,
  request: ClaimRequest,
  metrics: IdempotencyMetrics,
  work: RequestWork,
): Promise<OneCommitAnswer | { kind: 'lost_insert' }> {
  // Set in the unit's callback, where the compiler does not follow it: typed by hand.
  let claimed = undefined as { takenOver: boolean } | undefined;
  let inserting = false;
  const startedAt = performance.now();
  const tellClaimed = (claim: { takenOver: boolean }) => metrics.record(claim.takenOver ? 'taken_over' : 'claimed');
  try {
    const answer = await route.store.runUnit(async (): Promise<OneCommitAnswer> => {
      const claim = await route.oneCommit.claim(request);
      if (claim.kind !== 'claimed') return claim;
      claimed = claim;
      work.entered();
      const response = await responseOf(work);
      inserting = true;
      await route.oneCommit.complete(request, response);
      return { kind: 'finished', response, retainedForMs: claim.retainedForMs ?? request.retentionMs };
    });
    if (claimed) tellClaimed(claimed);
    return answer;
  } catch (error) {
    if (!claimed) {
      metrics.record('failed', error);
      throw error;
    }
    if (inserting && error instanceof LeaseLostError) return { kind: 'lost_insert' };
    tellClaimed(claimed);
    if (performance.now() - startedAt >= request.leaseMs) {
      // The store ended the unit at its lease (whatever error that surfaced as): nothing committed.
      logger.warn(`a one-commit request ran past its lease (${request.leaseMs} ms) and was rolled back: ${(error as Error).message}`);
      metrics.requestEnded({ kind: 'lease_lost' }, error);
      return { kind: 'lease_lost' };
    }
    metrics.requestEnded({ kind: 'gave_up', kept: false, given: true }, error);
    throw error;
  } finally {
    if (claimed && route.waitMs > 0) void route.store.settlement?.announceSettled(request);
  }
}

/** The handler's response; a business outcome it throws is its response too (its writes commit). */
async function responseOf(work: RequestWork): Promise<StoredResponse> {
  try {
    return work.respond(await work.handle());
  } catch (error) {
    if (!isIdempotentOutcome(error)) throw error;
    const { status, body, contentType } = error[IDEMPOTENT_OUTCOME]();
    return { status, body, contentType };
  }
}
