import { Logger } from '@nestjs/common';
import { IdempotencyProblem, idempotencyErrors } from '../idempotency.errors';
import { IdempotencyContext } from '../idempotency.context';
import { IdempotencyMetrics } from '../idempotency.metrics';
import { ClaimRequest, ClaimResult, StoredResponse } from '../idempotency.store';
import { RouteSettings } from '../idempotent-routes';
import { aboutOperation, openSpan } from '../idempotency.telemetry';
import { announceSettled, claimOrWait } from '../key-claims';
import { LeaseKeeper } from '../lease-keeper';
import { runInOneCommit } from '../one-commit-run';
import { OperationAttempt } from '../operation-attempt';
import { ReplayCache } from '../replay-cache';

/** Retry-After of an in-progress duplicate, as for HTTP. */
export const IN_PROGRESS_RETRY_AFTER_S = 1;

const VALUE_CONTENT_TYPE = 'application/json';

/** What a keyed operation answers: the handler's value (as stored), and whether it was replayed. */
export interface KeyedAnswer {
  value: unknown;
  replayed: boolean;
}

/**
 * A stored business outcome (IdempotentOutcome) replayed to a context that has
 * no HTTP status to give it: each context answers it as an error with the
 * stored status and body.
 */
export class ReplayedOutcome extends Error {
  override name = 'ReplayedOutcome';
  constructor(readonly response: StoredResponse) {
    super(`the operation ended with the outcome ${response.status}`);
  }
}

type Claimed = Extract<ClaimResult, { kind: 'claimed' }>;

/**
 * The protocol of a GraphQL mutation or a message handler once its key, scope
 * and fingerprint are read: the same claim, fencing, leases, retention, stores,
 * commit modes and replay cache as an HTTP route (claimOrWait, OperationAttempt,
 * LeaseKeeper; runInOneCommit for `commit: 'one'`), with the handler's value in place of an HTTP response. The
 * value is stored as its JSON, and both the first answer and every replay are
 * that JSON parsed, so a retry sees exactly what the first call saw. Its
 * problems are the module's IdempotencyProblems, which each context answers in
 * its own terms (graphql-context.ts, message-context.ts).
 */
export class KeyedOperation {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly metrics: IdempotencyMetrics,
    private readonly replays: ReplayCache,
    private readonly context: IdempotencyContext,
    private readonly policyUrl: string,
  ) {}

  run(route: RouteSettings, request: ClaimRequest, handle: () => Promise<unknown>): Promise<KeyedAnswer> {
    return aboutOperation(request.scope, request.key, route.operation, () => {
      const cached = this.replays.get(request.scope, request.key, request.fingerprint);
      if (cached) {
        this.metrics.replayCacheHits.inc();
        return Promise.resolve(this.replayed(cached));
      }
      const span = openSpan('idempotency.request');
      return span.run(() =>
        this.claimAndRun(route, request, handle).then(
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

  private async claimAndRun(route: RouteSettings, request: ClaimRequest, handle: () => Promise<unknown>): Promise<KeyedAnswer> {
    const sentAt = performance.now();
    const claim = route.oneCommit
      ? await runInOneCommit({ ...route, oneCommit: route.oneCommit }, request, this.metrics, {
          entered: () => this.context.enter(request.key, route.operation),
          handle,
          respond: storedValue,
        })
      : await claimOrWait(route.store, request, route.waitMs, this.metrics);
    switch (claim.kind) {
      case 'finished':
        // A one-commit route's call: claimed, run and committed with its writes.
        this.replays.rememberCommitted(route.store, request, claim.response, claim.retainedForMs, sentAt);
        if (claim.response.status >= 400) throw new ReplayedOutcome(claim.response);
        return { value: parseValue(claim.response.body), replayed: false };
      case 'lease_lost':
        throw idempotencyErrors.leaseLost(this.policyUrl);
      case 'completed':
        this.replays.rememberCommitted(route.store, request, claim.response, claim.retainedForMs, sentAt);
        return this.replayed(claim.response);
      case 'mismatch':
        this.metrics.record('mismatch');
        throw idempotencyErrors.reused(this.policyUrl);
      case 'in_progress':
        this.metrics.record('in_progress');
        throw idempotencyErrors.inProgress(this.policyUrl, IN_PROGRESS_RETRY_AFTER_S);
      case 'claimed':
        this.metrics.record(claim.takenOver ? 'taken_over' : 'claimed');
        this.context.enter(request.key, route.operation);
        try {
          return await this.attempt(route, request, claim, handle, sentAt);
        } finally {
          if (route.waitMs > 0) announceSettled(route.store, claim.owner);
        }
    }
  }

  /** The claimed key's one unit: the handler and the fenced completion with its value, settled once. */
  private async attempt(route: RouteSettings, request: ClaimRequest, claim: Claimed, handle: () => Promise<unknown>, sentAt: number): Promise<KeyedAnswer> {
    const lease = new LeaseKeeper(claim.owner, route.store, route.leaseMs, sentAt);
    const attempt = new OperationAttempt(lease, route.store, claim.recovery);
    const settled = await attempt.settle(
      () => attempt.completeWith(handle, storedValue),
      () => `${route.operation} returned without an ending`,
    );
    this.metrics.requestEnded(settled.end, settled.error);
    const { end } = settled;
    switch (end.kind) {
      case 'finished':
        if (end.notStored) this.logger.error(end.notStored.message);
        else this.replays.rememberCommitted(route.store, request, end.response, claim.retainedForMs, sentAt);
        // A business outcome stored in the unit was thrown by the handler: it stands as thrown.
        if (settled.threw) throw settled.error;
        return { value: parseValue(end.response.body), replayed: false };
      case 'lease_lost':
        throw idempotencyErrors.leaseLost(this.policyUrl);
      case 'released':
      case 'held':
      case 'gave_up':
        throw settled.error;
    }
  }

  private replayed(response: StoredResponse): KeyedAnswer {
    this.metrics.record('replayed');
    if (response.status >= 400) throw new ReplayedOutcome(response);
    return { value: parseValue(response.body), replayed: true };
  }
}

/** A handler's value as stored: its JSON (nothing, for a handler that returns nothing). */
function storedValue(value: unknown): StoredResponse {
  return { status: 200, body: value === undefined ? '' : (JSON.stringify(value) ?? ''), contentType: VALUE_CONTENT_TYPE };
}

function parseValue(body: string): unknown {
  return body === '' ? undefined : (JSON.parse(body) as unknown);
}
