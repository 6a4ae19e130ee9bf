import { Logger } from '@nestjs/common';
import { LeaseLostError, ResponseNotStoredError } from '../contract/idempotency.errors';
import { ClaimResult, IdempotencyStore, RecoveryPoint, RecoveryPoints, StoredResponse } from '../contract/idempotency.store';
import { IDEMPOTENT_OUTCOME, isIdempotentOutcome } from '../contract/idempotent-outcome';
import { AttemptEnd, OperationEnding } from '../contract/attempt-end';
import { IdempotencyMetrics } from '../telemetry/idempotency.metrics';
import { LeaseKeeper } from './lease-keeper';
import { RouteSettings } from './route-settings';

/** What a request does on its key once it is claimed, given by KeyedOperation. */
export interface RequestWork {
  /** The key is this request's: called before the handler runs. */
  entered(): void;
  /** The handler (pipes included); its value becomes the response. */
  handle(): Promise<unknown>;
  /** The handler's value as the exact response to store and send. */
  respond(value: unknown): StoredResponse;
  /** A phased route's handler runs its own units through `attempt` (HTTP routes only). */
  phased?: (attempt: OperationAttempt, name: string) => void;
}

/**
 * How a request that claimed its key ended, when it has an answer: its
 * response (`retainedForMs`: how long the store keeps it, as of the claim;
 * undefined when it was not stored; `thrown`: the business outcome its handler
 * threw, stored as its response), or `lease_lost`: the key is another's now.
 */
export type AttemptAnswer = { kind: 'finished'; response: StoredResponse; retainedForMs?: number; thrown?: { error: unknown } } | { kind: 'lease_lost' };

const logger = new Logger('Idempotency');

export interface SettledAttempt<T> {
  end: AttemptEnd;
  /** The work's result, when it returned. */
  value?: T;
  /** Whether the work threw. */
  threw: boolean;
  /** What the work threw, or (when the operation did not finish) an error saying it returned without an ending. */
  error?: unknown;
}

/**
 * One attempt at the operation of a claimed key: the whole protocol after the
 * claim, written once for every route and store, for a request (the
 * interceptor) and for the recovery job alike.
 *
 *   run    units of work (the store's runUnit), each fenced on the lease:
 *          a plain route is one unit, its handler and its completion;
 *          a phased route runs its own (PhasedOperation)
 *   settle finished -> the stored response    released / held -> as the operation left it
 *          lease lost -> nothing to give up    otherwise -> the key given up (released,
 *          or kept at its recovery point with its lease ended)
 *
 * A business outcome (IdempotentOutcome) thrown inside a unit is stored as the
 * response in that unit, which then commits, and is rethrown after it.
 */
export class OperationAttempt {
  private ending: OperationEnding | null = null;
  /** The completion of the current unit, final once the unit has committed. */
  private completion?: { response: StoredResponse; notStored?: Error };
  private point: string | null;
  private saved: unknown;

  constructor(
    readonly lease: LeaseKeeper,
    readonly store: IdempotencyStore,
    recovery: RecoveryPoint | null,
  ) {
    this.point = recovery?.point ?? null;
    this.saved = recovery?.state ?? null;
  }

  get ended(): OperationEnding | null {
    return this.ending;
  }

  /** The last recovery point that committed (null: nothing committed yet). */
  get recoveryPoint(): string | null {
    return this.point;
  }

  /** The state saved with the last recovery point. */
  get state(): unknown {
    return this.saved;
  }

  /** The store's recovery points; every phased route's store has them (checked at startup). */
  get recoveryPoints(): RecoveryPoints {
    if (!this.store.recovery) throw new Error('phased operations need a store with recovery points');
    return this.store.recovery;
  }

  /** A recovery point committed: from now on this is where the operation stands. */
  reached(point: string, state: unknown): void {
    this.point = point;
    this.saved = state;
  }

  assertOpen(name: string): void {
    if (this.ending) throw new Error(`the operation ${name} has already ended (${this.ending.kind})`);
  }

  /** One unit of work; a business outcome thrown by `work` is stored with it, committed, and rethrown. */
  async unit<T>(work: () => Promise<T>): Promise<T> {
    let outcome: { error: unknown } | undefined;
    let result: T | undefined;
    try {
      result = await this.store.runUnit(async () => {
        try {
          return await work();
        } catch (error) {
          if (!isIdempotentOutcome(error)) throw error;
          const { status, body, contentType } = error[IDEMPOTENT_OUTCOME]();
          await this.complete({ status, body, contentType });
          outcome = { error };
          return undefined;
        }
      });
    } catch (error) {
      this.completion = undefined;
      throw error;
    }
    // The unit committed: a response stored in it ends the operation.
    if (this.completion) this.ending = { kind: 'finished', ...this.completion };
    if (outcome) throw outcome.error;
    return result as T;
  }

  /** The last unit: `work`, and its result made a response by `respond`, stored with it. */
  completeWith<T>(work: () => Promise<T>, respond: (value: T) => StoredResponse): Promise<T> {
    return this.unit(async () => {
      const value = await work();
      await this.complete(respond(value));
      return value;
    });
  }

  /** The undo's writes and the key's deletion in one unit: a retry runs the operation anew. */
  async discard(undo: () => Promise<void>): Promise<void> {
    await this.store.runUnit(async () => {
      await undo();
      await this.lease.end((owner) => this.recoveryPoints.discard(owner));
    });
    this.ending = { kind: 'released' };
  }

  /** The operation stays open at its recovery point; its lease is set to `forMs` from now. */
  async hold(forMs: number): Promise<void> {
    const held = await this.lease.end((owner) => this.store.renew(owner, forMs));
    if (held === null) throw new LeaseLostError();
    this.ending = { kind: 'held' };
  }

  /**
   * Runs the attempt's work, then settles what it left: see the class. The
   * lease is stopped before this resolves. `unended` names an operation that
   * returned without an ending.
   */
  async settle<T>(work: () => Promise<T>, unended: () => string): Promise<SettledAttempt<T>> {
    try {
      let value: T | undefined;
      let threw = false;
      let failure: unknown;
      try {
        value = await work();
      } catch (error) {
        threw = true;
        failure = error;
      }
      const ending = this.ending;
      if (ending?.kind === 'finished') return { end: ending, value, threw, error: failure };
      const error = threw ? failure : new Error(unended());
      if (ending) return { end: ending, value, threw, error };
      if (failure instanceof LeaseLostError) return { end: { kind: 'lease_lost' }, value, threw, error };
      return { end: { kind: 'gave_up', kept: this.point !== null, given: await this.giveUp() }, value, threw, error };
    } finally {
      await this.lease.stop();
    }
  }

  /** Stores `response` as the owner's last fenced statement, inside the current unit. */
  private async complete(response: StoredResponse): Promise<void> {
    try {
      await this.lease.end((owner) => this.store.complete(owner, response));
      this.completion = { response };
    } catch (error) {
      if (!(error instanceof ResponseNotStoredError)) throw error;
      this.completion = { response, notStored: error };
    }
  }

  /** Releases the key (kept when a recovery point committed); a failure leaves it to the lease. */
  private async giveUp(): Promise<boolean> {
    try {
      await this.lease.end((owner) => this.store.release(owner));
      return true;
    } catch (error) {
      // The lease still frees the key; a retry after it takes the key over.
      logger.warn(`could not give up the key after a failure: ${(error as Error).message}`);
      return false;
    }
  }
}

/**
 * The attempt of a request's claimed key (told as the claim's outcome first):
 * one unit, the handler and its fenced completion; a phased route's handler
 * runs its own phases (no unit here) and ends with finish() (answered as
 * stored) or release(). An attempt that ends without an answer throws what
 * ended it. Duplicates waiting for the key are woken once it has settled.
 * `sentAt`: when the claim was sent (the lease is counted from it).
 */
export async function attemptClaimed(
  route: RouteSettings,
  claim: Extract<ClaimResult, { kind: 'claimed' }>,
  work: RequestWork,
  metrics: IdempotencyMetrics,
  sentAt: number,
): Promise<AttemptAnswer> {
  metrics.record(claim.takenOver ? 'taken_over' : 'claimed');
  work.entered();
  try {
    const lease = new LeaseKeeper(claim.owner, route.store, route.leaseMs, sentAt);
    const attempt = new OperationAttempt(lease, route.store, claim.recovery);
    let run = () => attempt.completeWith(() => work.handle(), (value) => work.respond(value));
    if (route.phased && work.phased) {
      work.phased(attempt, route.phased);
      run = () => work.handle() as Promise<never>;
    }
    const settled = await attempt.settle(run, () => `${route.operation} returned without an ending (a phased handler ends with finish() or release())`);
    metrics.requestEnded(settled.end, settled.error);
    return answerOf(settled, claim.retainedForMs);
  } finally {
    // Duplicates may be waiting for this key: wake them once it has settled.
    if (route.waitMs > 0) void route.store.settlement?.announceSettled(claim.owner);
  }
}

/** A settled request's answer (`retainedForMs`: the claim's); one that ended without an answer throws what ended it. */
function answerOf(settled: SettledAttempt<unknown>, retainedForMs: number | undefined): AttemptAnswer {
  const { end } = settled;
  switch (end.kind) {
    case 'finished':
      // Not stored, the work happened all the same: answered rather than inviting a retry
      // that repeats it. The key stays in progress; a retry after the lease runs the route again.
      if (end.notStored) logger.error(end.notStored.message);
      return {
        kind: 'finished',
        response: end.response,
        retainedForMs: end.notStored ? undefined : retainedForMs,
        thrown: settled.threw ? { error: settled.error } : undefined,
      };
    case 'lease_lost':
      // The key belongs to the attempt that took it over: nothing of ours to release.
      return { kind: 'lease_lost' };
    case 'released':
    case 'held':
    case 'gave_up':
      throw settled.error;
  }
}
