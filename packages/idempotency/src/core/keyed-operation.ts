import { Logger } from '@nestjs/common';
import { IdempotencyProblem, idempotencyErrors } from '../contract/idempotency.errors';
import { IdempotencyContext } from './idempotency.context';
import { IdempotencyMetrics } from '../telemetry/idempotency.metrics';
import { ClaimRequest, ClaimResult, StoredResponse } from '../contract/idempotency.store';
import { keyId } from '../contract/key-id';
import { parseIdempotencyKey } from './idempotency-key';
import { RouteSettings } from './route-settings';
import { aboutOperation, openSpan } from '../telemetry/idempotency.telemetry';
import { claimOrWait } from './key-claims';
import { LeaseKeeper } from './lease-keeper';
import { runInOneCommit } from './one-commit-run';
import { OperationAttempt } from './operation-attempt';
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
  phased?(attempt: OperationAttempt, name: string): void;
}

type Claimed = Extract<ClaimResult, { kind: 'claimed' }>;

/**
 * The protocol of every keyed call once its key, scope and fingerprint are
 * read, for HTTP routes, GraphQL mutations and message handlers alike (what
 * differs is in each one's Answering):
 *
 *   in the replay cache? replay it (no database)
 *   -> claim-or-get (claimOrWait), or, for `commit: 'one'`, the claim inside
 *      the route's own transaction (runInOneCommit), which comes back finished
 *     completed      -> replay the stored response
 *     other request  -> 422          in progress -> 409 + Retry-After
 *     claimed        -> the attempt (OperationAttempt): a unit of the route's
 *                       store { handler; fenced completion }, its lease renewed
 *                       while it runs (LeaseKeeper); a phased route runs its
 *                       own units (PhasedOperation). Settled once.
 *   error in the unit: business outcome -> stored in it, committed, answered like a result
 *                      anything else    -> rolled back, key released if still ours, rethrown
 *
 * Its problems are IdempotencyProblems, which each kind of call answers in its
 * own terms.
 */
export class KeyedOperation {
  private readonly logger = new Logger('Idempotency');

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
    const claim = route.oneCommit
      ? await runInOneCommit({ ...route, oneCommit: route.oneCommit }, request, this.metrics, {
          entered: () => this.context.enter(request.key, route.operation),
          handle,
          respond: (value) => io.stored(value),
        })
      : await claimOrWait(route.store, request, route.waitMs, this.metrics);
    switch (claim.kind) {
      case 'finished':
        // A one-commit route's call: claimed, run and committed with its writes.
        this.replays.rememberCommitted(route.store, request, claim.response, claim.retainedForMs, sentAt);
        return io.answer(claim.response, false);
      case 'lease_lost':
        throw idempotencyErrors.leaseLost(this.policyUrl);
      case 'completed':
        this.replays.rememberCommitted(route.store, request, claim.response, claim.retainedForMs, sentAt);
        return this.replay(claim.response, io);
      case 'mismatch':
        this.metrics.record('mismatch');
        throw idempotencyErrors.reused(this.policyUrl);
      case 'in_progress':
        this.metrics.record('in_progress');
        // The lease (claim.retryAfterMs left of it) only bounds a crashed owner; a
        // live one usually answers within a second, so callers are asked back soon.
        throw idempotencyErrors.inProgress(this.policyUrl, IN_PROGRESS_RETRY_AFTER_S);
      case 'claimed':
        this.metrics.record(claim.takenOver ? 'taken_over' : 'claimed');
        this.context.enter(request.key, route.operation);
        try {
          return await this.attempt(route, request, claim, handle, io, sentAt);
        } finally {
          // Duplicates may be waiting for this key: wake them once it has settled.
          if (route.waitMs > 0) void route.store.settlement?.announceSettled(claim.owner);
        }
    }
  }

  /**
   * The attempt of a claimed key: one unit, the handler and its fenced
   * completion; a phased route's handler runs its own phases (no unit here)
   * and ends with finish() (answered as stored) or release().
   */
  private async attempt<A>(route: RouteSettings, request: ClaimRequest, claim: Claimed, handle: () => Promise<unknown>, io: Answering<A>, sentAt: number): Promise<A> {
    const lease = new LeaseKeeper(claim.owner, route.store, route.leaseMs, sentAt);
    const attempt = new OperationAttempt(lease, route.store, claim.recovery);
    let work = () => attempt.completeWith(handle, (value) => io.stored(value));
    if (route.phased && io.phased) {
      io.phased(attempt, route.phased);
      work = handle as () => Promise<never>;
    }
    const settled = await attempt.settle(work, () => `${route.operation} returned without an ending (a phased handler ends with finish() or release())`);
    this.metrics.requestEnded(settled.end, settled.error);
    const { end } = settled;
    switch (end.kind) {
      case 'finished':
        if (end.notStored) {
          // The work happened: answer it rather than invite a retry that repeats it.
          // The key stays in progress; a retry after the lease runs the route again.
          this.logger.error(end.notStored.message);
        } else {
          this.replays.rememberCommitted(route.store, request, end.response, claim.retainedForMs, sentAt);
        }
        return io.answer(end.response, false, settled.threw ? { error: settled.error } : undefined);
      case 'lease_lost':
        // The key belongs to the attempt that took it over: nothing of ours to release.
        throw idempotencyErrors.leaseLost(this.policyUrl);
      case 'released':
      case 'held':
      case 'gave_up':
        throw settled.error;
    }
  }

  private replay<A>(response: StoredResponse, io: Answering<A>): A {
    this.metrics.record('replayed');
    return io.answer(response, true);
  }
}
