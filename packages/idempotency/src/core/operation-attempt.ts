import { Logger } from '@nestjs/common';
import { LeaseLostError, ResponseNotStoredError } from '../contract/idempotency.errors';
import { IdempotencyStore, RecoveryPoint, RecoveryPoints, StoredResponse } from '../contract/idempotency.store';
import { IDEMPOTENT_OUTCOME, isIdempotentOutcome } from '../contract/idempotent-outcome';
import { AttemptEnd, OperationEnding } from '../contract/attempt-end';
import { LeaseKeeper } from './lease-keeper';

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
  private readonly logger = new Logger('Idempotency');
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
      this.logger.warn(`could not give up the key after a failure: ${(error as Error).message}`);
      return false;
    }
  }
}
