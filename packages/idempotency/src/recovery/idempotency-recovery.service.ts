import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { ClsService } from 'nestjs-cls';
import { IdempotencyMetrics } from '../telemetry/idempotency.metrics';
import { IDEMPOTENCY_CLS, IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../config/idempotency.options';
import { IdempotencyStore, Ownership, RecoveryPoint, RecoveryPoints } from '../contract/idempotency.store';
import { keyId } from '../contract/key-id';
import { IdempotencyStores } from '../stores/idempotency-stores';
import { LeaseKeeper } from '../core/lease-keeper';
import { aboutOperation, inSpan } from '../telemetry/idempotency.telemetry';
import { OperationAttempt } from '../core/operation-attempt';
import { PhasedOperation } from '../core/phased-operation';
import type { PhasedOperationName } from '../core/phased-operation-name';

/** Drives a phased operation on from its recovery point to finish() or release(). */
export type ResumeFunction<S = unknown> = (operation: PhasedOperation<S>) => Promise<unknown>;

export interface RecoveryRunResult {
  /** Operations taken over by this run. */
  taken: number;
  finished: number;
  released: number;
  /** Still unknown (e.g. the outside system is down): kept, to be resumed by the next attempt. */
  failed: number;
}

/** What IdempotencyRecovery.takeOver() did: `taken: false`, the operation is finished, gone, or its owner still at work. */
export type TakeOverResult<T> = { taken: false } | { taken: true; result: T };

/** An operation taken over from a store with recovery points. */
interface Taken {
  store: IdempotencyStore;
  owner: Ownership;
  recovery: RecoveryPoint;
  /** When the takeover was sent: the lease is counted from here. */
  takenAt: number;
}

/**
 * Recovery without the client. A phased request that crashed (or gave up on an
 * unknown outcome) after a recovery point leaves its key in progress with that
 * point; if the client never retries, nobody would ever learn whether the
 * outside effect happened. This job, every `recovery.interval` on every instance,
 * takes such keys over once their lease has expired (SKIP LOCKED plus the lease
 * compare-and-set: one winner per key, across instances and against a retry),
 * and calls the resume function registered under the operation's name (its
 * @Resumes() method, found by ResumersExplorer, or one registered by hand), which
 * drives it to its end exactly as a retry would: the effect that happened gets
 * its record and its stored response (a later retry replays it), one that did
 * not is released. An operation that still cannot end gives its lease up and is
 * tried again by the next attempt.
 *
 * The job is an interval of the module's own, as the purge's cron job is:
 * started once the app has bootstrapped, cleared before it shuts down.
 */
@Injectable()
export class IdempotencyRecovery implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('IdempotencyRecovery');
  private readonly resumers = new Map<string, ResumeFunction>();
  private inFlight?: Promise<RecoveryRunResult>;
  /** The running schedule; undefined while the job is off or stopped. */
  private timer?: NodeJS.Timeout;
  /** The stores that keep recovery points (the PostgreSQL store). */
  private readonly stores: { store: IdempotencyStore; recovery: RecoveryPoints }[];

  constructor(
    stores: IdempotencyStores,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_CLS) private readonly cls: ClsService,
    private readonly metrics: IdempotencyMetrics,
  ) {
    this.stores = stores.all.flatMap((store) => (store.recovery ? [{ store, recovery: store.recovery }] : []));
  }

  /**
   * Registers how the operation `name` (the `phased` of its route) is resumed
   * without a request: what @Resumes() does, for a resume function an app
   * registers by hand (in onModuleInit, before the startup checks every phased
   * route has one). One per operation.
   */
  register<S>(name: PhasedOperationName<S>, resume: ResumeFunction<NoInfer<S>>): void;
  register(name: string, resume: ResumeFunction): void;
  register(name: string, resume: ResumeFunction): void {
    if (this.resumers.has(name)) throw new Error(`a resume function for ${name} is already registered (by @Resumes() or register()); an operation has one`);
    this.resumers.set(name, resume);
  }

  /** Whether the operation `name` has a resume function. */
  hasResumer(name: string): boolean {
    return this.resumers.has(name);
  }

  onApplicationBootstrap(): void {
    const { enabled, intervalMs } = this.options.recovery;
    if (!enabled) return;
    this.timer = setInterval(() => void this.runScheduled(), intervalMs);
    this.logger.log(`recovery of abandoned phased operations every ${intervalMs} ms`);
  }

  /** Whether this process runs the job on its schedule (from bootstrap to shutdown, while enabled). */
  get scheduled(): boolean {
    return this.timer !== undefined;
  }

  /** Stops the schedule and lets a running recovery end, before the data source closes. */
  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.inFlight?.catch(() => undefined);
  }

  private async runScheduled(): Promise<void> {
    try {
      await this.runOnce();
    } catch (error) {
      this.logger.error(`recovery run failed: ${(error as Error).message}`);
    }
  }

  /** One run: takes over a batch of abandoned operations and resumes each. */
  runOnce(): Promise<RecoveryRunResult> {
    if (this.inFlight) return Promise.resolve({ taken: 0, finished: 0, released: 0, failed: 0 });
    const run = this.run().finally(() => {
      this.inFlight = undefined;
    });
    this.inFlight = run;
    return run;
  }

  /**
   * Each operation is taken over just before it is worked on, with a lease of
   * its own: a batch taken at once would let the last ones' leases run out
   * while the first ones wait on the outside world.
   */
  private async run(): Promise<RecoveryRunResult> {
    const result: RecoveryRunResult = { taken: 0, finished: 0, released: 0, failed: 0 };
    for (const { store, recovery } of this.stores) {
      // An operation that could not end gives its lease up at once: the next run, not this one, tries it again.
      const tried = new Set<string>();
      while (result.taken < this.options.recovery.batchSize) {
        const takenAt = performance.now();
        const next = await recovery.takeOver(this.options.leaseMs);
        if (!next) break;
        const taken: Taken = { store, ...next, takenAt };
        if (tried.has(next.owner.id)) {
          await this.attempt(taken).settle(async () => undefined, () => 'tried already in this run');
          break;
        }
        tried.add(next.owner.id);
        result.taken++;
        const ending = await this.resume(taken);
        if (ending === 'finished') result.finished++;
        else if (ending === 'released') result.released++;
        else result.failed++;
      }
    }
    if (result.taken) this.logger.log(`recovery: ${JSON.stringify(result)}`);
    return result;
  }

  /**
   * Takes over the operation at (scope, key), when it stands at a recovery point
   * and no one holds its lease, and runs `work` with it in the caller's context
   * (e.g. a webhook that settles it from the outside system's own word).
   * `work` should end it (finish() or release()); if it does not, or fails, the
   * lease is given up at once for the next attempt. `{ taken: false }`: the
   * operation is finished, gone, or its owner is still at work. A key that
   * holds another operation than `name` is an error (and its lease given up).
   */
  takeOver<S, T>(name: PhasedOperationName<S>, scope: string, key: string, work: (operation: PhasedOperation<S>) => Promise<T>): Promise<TakeOverResult<T>>;
  takeOver<T>(name: string, scope: string, key: string, work: (operation: PhasedOperation) => Promise<T>): Promise<TakeOverResult<T>>;
  async takeOver<S, T>(name: string, scope: string, key: string, work: (operation: PhasedOperation<S>) => Promise<T>): Promise<TakeOverResult<T>> {
    const at = { scope, key, id: keyId(scope, key) };
    for (const { store, recovery } of this.stores) {
      const takenAt = performance.now();
      const taken = await recovery.takeOver(this.options.leaseMs, at);
      if (!taken) continue;
      const attempt = this.attempt({ store, ...taken, takenAt });
      const held = taken.recovery.operation;
      const operation = new PhasedOperation<S>(attempt, held, taken.recovery.status);
      const run = async (): Promise<T> => {
        if (held !== name) throw new Error(`the key holds the operation ${held}, not ${name}`);
        return work(operation);
      };
      const settled = await aboutOperation(at, held, () =>
        inSpan('idempotency.takeover', () => attempt.settle(run, () => 'the work returned without finish() or release()')),
      );
      if (settled.threw) throw settled.error;
      return { taken: true, result: settled.value as T };
    }
    return { taken: false };
  }

  private attempt(taken: Taken): OperationAttempt {
    const lease = new LeaseKeeper(taken.owner, taken.store, this.options.leaseMs, taken.takenAt);
    return new OperationAttempt(lease, taken.store, taken.recovery);
  }

  /** Resumes one operation with its registered function, in a CLS context of its own (the job has no request). */
  private resume(taken: Taken): Promise<'finished' | 'released' | 'failed'> {
    const { owner, recovery } = taken;
    return aboutOperation(owner, recovery.operation, () =>
      inSpan('idempotency.recovery', async () => {
        const attempt = this.attempt(taken);
        const resume = this.resumers.get(recovery.operation);
        if (!resume) {
          this.metrics.recoveries.inc({ result: 'unknown_operation' });
          this.logger.warn(`no resume function registered for ${recovery.operation}; key left for a later attempt`);
          await attempt.settle(async () => undefined, () => 'no resume function');
          return 'failed';
        }
        const operation = new PhasedOperation(attempt, recovery.operation, recovery.status);
        const settled = await attempt.settle(
          () => this.cls.run(() => resume(operation)),
          () => `the resume function of ${recovery.operation} returned without finish() or release()`,
        );
        const result = this.metrics.recoveryEnded(settled.end);
        if (result === 'finished' || result === 'released') return result;
        if (settled.threw) this.logger.warn(`could not recover ${recovery.operation} at ${recovery.point}: ${(settled.error as Error).message}`);
        else if (result === 'failed') this.logger.warn((settled.error as Error).message);
        return 'failed';
      }),
    );
  }
}
