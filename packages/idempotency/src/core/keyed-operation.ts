import { IdempotencyProblem, idempotencyErrors } from '../contract/idempotency.errors';
import { IdempotencyContext } from './idempotency.context';
import { IdempotencyMetrics } from '../telemetry/idempotency.metrics';
import { ClaimRequest, StoredResponse } from '../contract/idempotency.store';
import { keyId } from '../contract/key-id';
import { parseIdempotencyKey } from './idempotency-key';
import { RouteSettings } from './route-settings';
import { aboutOperation, openSpan } from '../telemetry/idempotency.telemetry';
import { claimOrWait } from './key-claims';
import { OperationAttempt, RequestWork, attemptClaimed } from './operation-attempt';
import { ReplayCache } from './replay-cache';

/** Retry-After of an in-progress duplicate. */
const IN_PROGRESS_RETRY_AFTER_S = 1;

/**
 * How one kind of call (an HTTP request, a GraphQL field, a message) stores
 * its handler's value and gives a stored response back as its answer.
 */
export interface Answering<A> {
  /** The handler's value as the response stored under the key (the exact bytes a replay gives back). */
  stored(value: unknown): StoredResponse;
  /**
   * A stored response as this call's answer: the first call's (`thrown`: the
   * business outcome its handler threw, stored as its response) or a replay's.
   */
  answer(response: StoredResponse, replayed: boolean, thrown?: { error: unknown }): A;
  /** A phased route's handler runs its own units through `attempt` (HTTP routes only). */
  phased?: (attempt: OperationAttempt, name: string) => void;
}

/**
 * The protocol of every keyed call once its key, scope and fingerprint are
 * read, for HTTP routes, GraphQL mutations and message handlers alike (what
 * differs is in each one's Answering):
 *
 *   in the replay cache? replay it (no database)
 *   -> claim-or-get, waiting for an owner at work with `wait` (claimOrWait);
 *      for `commit: 'one'`, the claim inside the route's own transaction
 *      (runInOneCommit), which comes back finished
 *     completed      -> replay the stored response
 *     other request  -> 422          in progress -> 409 + Retry-After
 *     claimed        -> the attempt (attemptClaimed, OperationAttempt): a unit
 *                       of the route's store { handler; fenced completion }, its
 *                       lease renewed while it runs (LeaseKeeper); a phased
 *                       route runs its own units (PhasedOperation). Settled once.
 *   a response committed (a replay's, or this request's) is kept in the replay cache
 *   error in the unit: business outcome -> stored in it, committed, answered like a result
 *                      anything else    -> rolled back, key released if still ours, rethrown
 *
 * Its problems are IdempotencyProblems, which each kind of call answers in its
 * own terms.
 */
export class KeyedOperation {
  constructor(
    private readonly metrics: IdempotencyMetrics,
    private readonly replays: ReplayCache,
    private readonly context: IdempotencyContext,
    private readonly policyUrl: string | undefined,
  ) {}

  /** The call's key (`raw`: as it came), or undefined when it has none and the route does not require one. */
  keyOf(route: RouteSettings, raw: string | undefined): string | undefined {
    if (raw === undefined) {
      if (route.required) throw idempotencyErrors.missing(this.policyUrl);
      return undefined;
    }
    const parsed = parseIdempotencyKey(raw);
    if (!parsed.ok) throw idempotencyErrors.invalid(this.policyUrl, parsed.reason);
    return parsed.key;
  }

  /** Runs the call: its request, with the key's id derived here, once, is what the telemetry and the store are given. */
  run<A>(route: RouteSettings, call: Omit<ClaimRequest, 'id' | 'leaseMs' | 'retentionMs'>, handle: () => Promise<unknown>, io: Answering<A>): Promise<A> {
    const request: ClaimRequest = { ...call, id: keyId(call.scope, call.key), leaseMs: route.leaseMs, retentionMs: route.retentionMs };
    return aboutOperation(request, route.operation, () => {
      const cached = this.replays.get(request.scope, request.key, request.fingerprint);
      if (cached) {
        this.metrics.replayCacheHits.inc();
        return Promise.resolve(this.replay(cached, io));
      }
      const span = openSpan('idempotency.request');
      return span.run(() =>
        this.claimAndRun(route, request, handle, io).then(
          (answer) => {
            span.end();
            return answer;
          },
          (error: unknown) => {
            // The module's own problems are answers, not failures of the operation.
            span.end(error instanceof IdempotencyProblem ? undefined : error);
            throw error;
          },
        ),
      );
    });
  }

  private async claimAndRun<A>(route: RouteSettings, request: ClaimRequest, handle: () => Promise<unknown>, io: Answering<A>): Promise<A> {
    // Before the claim is sent: the retention it reports is counted from here.
    const sentAt = performance.now();
    const work: RequestWork = {
      entered: () => this.context.enter(request.key, route.operation),
      handle,
      respond: (value) => io.stored(value),
      phased: io.phased,
    };
    const claim = await claimOrWait(route, request, this.metrics, work);
    const answer = claim.kind === 'claimed' ? await attemptClaimed(route, claim, work, this.metrics, sentAt) : claim;
    switch (answer.kind) {
      case 'completed':
      case 'finished':
        // Committed: a replay's response, or this request's (a one-commit route's with its writes).
        this.replays.rememberCommitted(route.store, request, answer.response, answer.retainedForMs, sentAt);
        return answer.kind === 'completed' ? this.replay(answer.response, io) : io.answer(answer.response, false, answer.thrown);
      case 'lease_lost':
        throw idempotencyErrors.leaseLost(this.policyUrl);
      case 'mismatch':
        this.metrics.record('mismatch');
        throw idempotencyErrors.reused(this.policyUrl);
      case 'in_progress':
        this.metrics.record('in_progress');
        // The lease (claim.retryAfterMs left of it) only bounds a crashed owner; a
        // live one usually answers within a second, so callers are asked back soon.
        throw idempotencyErrors.inProgress(this.policyUrl, IN_PROGRESS_RETRY_AFTER_S);
    }
  }

  private replay<A>(response: StoredResponse, io: Answering<A>): A {
    this.metrics.record('replayed');
    return io.answer(response, true);
  }
}
