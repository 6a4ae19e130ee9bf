import { ExecutionContext, createParamDecorator } from '@nestjs/common';
import { inSpan } from '../telemetry/idempotency.telemetry';
import { OperationEnding } from '../contract/attempt-end';
import { OperationAttempt } from './operation-attempt';

/**
 * A request whose work reaches outside the database (a card network, a
 * provider's API) runs in atomic phases instead of one transaction, so that no
 * connection or lock is held while the outside world answers, and so that an
 * effect out there always ends recorded here (recovery points, after Brandur
 * Leach's "Implementing Stripe-like Idempotency Keys in Postgres"):
 *
 *   op.checkpoint('started', tx1)   -- its writes + the recovery point, one transaction
 *   <call the outside world>       -- no transaction; a key of ours that is the same on every resume
 *   op.finish(tx2)                  -- its writes + the stored response, one transaction
 *
 * Every phase is fenced on the owner's lease token, like the completion: an
 * attempt whose key was taken over cannot commit any phase (LeaseLostError).
 * The lease is renewed while the operation runs (LeaseKeeper), so it covers
 * calls of any length; `call` refuses to reach the outside world once it may
 * have been lost.
 * An attempt that takes the key over after the lease (a retry, or the recovery
 * job when no one retries) gets the last recovery point and its saved state, and
 * resumes from there. Three endings:
 *   finish   -> the response is stored with the last writes and sent
 *   release  -> nothing happened out there: the phases are undone by the given
 *               writes and the key is deleted in the same transaction
 *   an error -> before any recovery point: the key is released, as for any route;
 *               after one: the outcome is unknown, so the key and its point are
 *               kept and the lease is given up at once (the next attempt resumes)
 * A business outcome (IdempotentOutcome) thrown inside a phase commits that
 * phase's writes with the outcome stored as the response, as on other routes.
 * Each phase is a unit of work of the route's store (a PostgreSQL transaction);
 * the protocol under it is OperationAttempt's.
 */
export class PhasedOperation<S = unknown> {
  /** @internal Created by the interceptor (a request) or the recovery job, over the attempt it settles. */
  constructor(
    private readonly attempt: OperationAttempt,
    /** The name under which the recovery job finds this operation's resume function. */
    readonly name: string,
    /** The status a success answers with (the route's). */
    private readonly successStatus: number,
  ) {}

  /** The scope (principal id) that owns the key. */
  get scope(): string {
    return this.attempt.lease.owner.scope;
  }

  /** The Idempotency-Key, as the client sent it (normalised). */
  get key(): string {
    return this.attempt.lease.owner.key;
  }

  /** The last recovery point that committed (null: nothing committed yet, start from the beginning). */
  get recoveryPoint(): string | null {
    return this.attempt.recoveryPoint;
  }

  /** The state saved with the last recovery point. */
  get state(): S | null {
    return this.attempt.state as S | null;
  }

  /** How the operation ended (null while it has not). */
  get outcome(): OperationEnding | null {
    return this.attempt.ended;
  }

  /**
   * A call to the outside world (the card network): made only while this
   * attempt still holds the key's lease, else LeaseLostError and nothing is
   * sent (the attempt that took the key over carries on). The lease is renewed
   * while the call runs.
   */
  async call<T>(outside: () => Promise<T>, name = 'outside'): Promise<T> {
    this.attempt.assertOpen(this.name);
    return inSpan(`idempotency.call ${name}`, async () => {
      await this.attempt.lease.confirm();
      return outside();
    });
  }

  /**
   * Runs `work` in one transaction that also records the recovery point `point`
   * with `state(result)`. From then on, any attempt at this key resumes there.
   */
  async checkpoint<T>(point: string, work: () => Promise<T>, state: (result: T) => S): Promise<T> {
    this.attempt.assertOpen(this.name);
    const { lease, recoveryPoints } = this.attempt;
    let saved: S | undefined;
    let ended!: () => void;
    const unitEnded = new Promise<void>((resolve) => (ended = resolve));
    const result = await inSpan(`idempotency.checkpoint ${point}`, () =>
      this.attempt
        .unit(async () => {
          const value = await work();
          saved = state(value);
          const recovery = { operation: this.name, point, state: saved, status: this.successStatus };
          // The unit's last write: it may go with the COMMIT, so no renewal until the unit has ended.
          await lease.fenced((owner) => recoveryPoints.checkpoint(owner, recovery), unitEnded);
          return value;
        })
        .finally(ended),
    );
    this.attempt.reached(point, saved ?? null);
    return result;
  }

  /**
   * The last phase: `work` and the stored response commit in one transaction.
   * The response is `work`'s result as JSON with the route's status, and a
   * `Location` from `location(result)` when given.
   */
  finish<T>(work: () => Promise<T>, options: { location?: (result: T) => string } = {}): Promise<T> {
    this.attempt.assertOpen(this.name);
    return inSpan('idempotency.finish', () =>
      this.attempt.completeWith(work, (value) => ({
        status: this.successStatus,
        body: value === undefined ? '' : JSON.stringify(value),
        contentType: 'application/json; charset=utf-8',
        location: options.location?.(value),
      })),
    );
  }

  /**
   * Nothing happened outside: `undo` reverts what the phases wrote and the key is
   * deleted, in one transaction, so a retry runs the operation anew.
   */
  async release(undo: () => Promise<void>): Promise<void> {
    this.attempt.assertOpen(this.name);
    await inSpan('idempotency.release', () => this.attempt.discard(undo));
  }

  /**
   * Nothing this attempt can do will end the operation, and trying again at once
   * would not either (the outside system does not know the operation's object:
   * a configuration an operator must fix). The operation stays open at its
   * recovery point and its lease is set to `forMs` from now, so neither a retry
   * (409) nor the recovery job tries it again before then; after that it is
   * resumed as usual. The caller then throws its own error.
   */
  async holdOff(forMs: number): Promise<void> {
    this.attempt.assertOpen(this.name);
    await this.attempt.hold(forMs);
  }
}

/** Where the interceptor leaves the operation for the handler. */
export const PHASED_OPERATION = Symbol.for('safe-retries.phased-operation');

/**
 * The PhasedOperation of the current request, on a route declared with
 * `@Idempotent({ phased: 'name' })`.
 */
export const Operation = createParamDecorator((_data: unknown, context: ExecutionContext): PhasedOperation => {
  const request = context.switchToHttp().getRequest<{ [PHASED_OPERATION]?: PhasedOperation }>();
  const operation = request[PHASED_OPERATION];
  if (!operation) throw new Error('@Operation() is only available on @Idempotent({ phased }) routes');
  return operation;
});
