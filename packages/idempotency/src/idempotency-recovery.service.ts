import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsService } from 'nestjs-cls';
import { LeaseLostError } from './idempotency.errors';
import { IdempotencyMetrics } from './idempotency.metrics';
import { IDEMPOTENCY_CLS, IDEMPOTENCY_OPTIONS, IDEMPOTENCY_TX_HOST, ResolvedIdempotencyOptions } from './idempotency.options';
import { IDEMPOTENCY_SCHEDULER } from './idempotency.scheduler';
import { IDEMPOTENCY_STORE, IdempotencyStore, RecoveryPoint } from './idempotency.store';
import { LeaseKeeper } from './lease-keeper';
import { aboutOperation, emit, inSpan } from './idempotency.telemetry';
import { PhasedOperation } from './phased-operation';
import type { PhasedOperationName } from './phased-operation-name';

/** The name of the recovery's interval in SchedulerRegistry. */
export const RECOVERY_JOB_NAME = 'idempotency-recovery';

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
 * The job is an interval in the app's SchedulerRegistry (the app imports
 * ScheduleModule.forRoot()), under RECOVERY_JOB_NAME, as the purge's cron job
 * is; the registry clears it when the app shuts down.
 */
@Injectable()
export class IdempotencyRecovery implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('IdempotencyRecovery');
  private readonly resumers = new Map<string, ResumeFunction>();
  private inFlight?: Promise<RecoveryRunResult>;

  constructor(
    @Inject(IDEMPOTENCY_STORE) private readonly store: IdempotencyStore,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_TX_HOST) private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @Inject(IDEMPOTENCY_CLS) private readonly cls: ClsService,
    private readonly metrics: IdempotencyMetrics,
    // Defined whenever recovery is enabled: the module refuses to start otherwise.
    @Inject(IDEMPOTENCY_SCHEDULER) private readonly scheduler: SchedulerRegistry | undefined,
  ) {}

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
    if (!enabled || !this.scheduler) return;
    this.scheduler.addInterval(RECOVERY_JOB_NAME, setInterval(() => void this.runScheduled(), intervalMs));
    this.logger.log(`recovery of abandoned phased operations every ${intervalMs} ms`);
  }

  /** Stops the schedule and lets a running recovery end, before the data source closes. */
  async beforeApplicationShutdown(): Promise<void> {
    // ScheduleModule may already have deleted every registered job.
    if (this.scheduler?.doesExist('interval', RECOVERY_JOB_NAME)) this.scheduler.deleteInterval(RECOVERY_JOB_NAME);
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
    // An operation that could not end gives its lease up at once: the next run, not this one, tries it again.
    const tried = new Set<string>();
    while (result.taken < this.options.recovery.batchSize) {
      const takenAt = performance.now();
      const [next] = await this.store.takeOverAbandoned(1, this.options.leaseMs);
      if (!next) break;
      const lease = new LeaseKeeper(next.owner, this.store, this.options.leaseMs, takenAt);
      const id = JSON.stringify([next.owner.scope, next.owner.key]);
      if (tried.has(id)) {
        await this.giveUp(lease);
        break;
      }
      tried.add(id);
      result.taken++;
      const ending = await this.resume(lease, next.recovery);
      if (ending === 'finished') result.finished++;
      else if (ending === 'released') result.released++;
      else result.failed++;
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
    const takenAt = performance.now();
    const taken = await this.store.takeOverOperation(scope, key, this.options.leaseMs);
    if (!taken) return { taken: false };
    const { owner, recovery } = taken;
    const lease = new LeaseKeeper(owner, this.store, this.options.leaseMs, takenAt);
    const operation = new PhasedOperation<S>(lease, recovery.operation, recovery.status, recovery, this.store, this.txHost);
    try {
      if (recovery.operation !== name) throw new Error(`the key holds the operation ${recovery.operation}, not ${name}`);
      const result = await aboutOperation(scope, key, recovery.operation, () => inSpan('idempotency.takeover', () => work(operation)));
      return { taken: true, result };
    } finally {
      if (!operation.outcome) await this.giveUp(lease);
      await lease.stop();
    }
  }

  private async resume(lease: LeaseKeeper, recovery: RecoveryPoint): Promise<'finished' | 'released' | 'failed'> {
    const { scope, key } = lease.owner;
    try {
      return await aboutOperation(scope, key, recovery.operation, () =>
        inSpan('idempotency.recovery', async () => {
          const ending = await this.resumeUnderLease(lease, recovery);
          if (ending !== 'failed') emit('recovered');
          return ending;
        }),
      );
    } finally {
      await lease.stop();
    }
  }

  private async resumeUnderLease(lease: LeaseKeeper, recovery: RecoveryPoint): Promise<'finished' | 'released' | 'failed'> {
    const resume = this.resumers.get(recovery.operation);
    if (!resume) {
      this.metrics.recoveries.inc({ result: 'unknown_operation' });
      this.logger.warn(`no resume function registered for ${recovery.operation}; key left for a later attempt`);
      await this.giveUp(lease);
      return 'failed';
    }
    const operation = new PhasedOperation(lease, recovery.operation, recovery.status, recovery, this.store, this.txHost);
    try {
      // The job has no request: the ambient transaction needs a CLS context of its own.
      await this.cls.run(() => resume(operation));
    } catch (error) {
      const ending = operation.outcome?.kind;
      if (ending === 'finished' || ending === 'released') {
        this.metrics.recoveries.inc({ result: ending });
        return ending;
      }
      this.metrics.recoveries.inc({ result: ending === 'held' ? 'held' : 'failed' });
      this.logger.warn(`could not recover ${recovery.operation} at ${recovery.point}: ${(error as Error).message}`);
      // Held: it keeps the lease it asked for. Lease lost: nothing of ours to give up.
      if (ending !== 'held' && !(error instanceof LeaseLostError)) await this.giveUp(lease);
      return 'failed';
    }
    const ending = operation.outcome?.kind;
    if (ending === 'finished' || ending === 'released') {
      this.metrics.recoveries.inc({ result: ending });
      return ending;
    }
    if (ending === 'held') {
      this.metrics.recoveries.inc({ result: 'held' });
      return 'failed';
    }
    this.metrics.recoveries.inc({ result: 'failed' });
    this.logger.warn(`the resume function of ${recovery.operation} returned without finish() or release()`);
    await this.giveUp(lease);
    return 'failed';
  }

  private async giveUp(lease: LeaseKeeper): Promise<void> {
    await lease.end((owner) => this.store.yieldLease(owner)).catch((error: unknown) => {
      this.logger.warn(`could not give up the lease of a recovered operation: ${(error as Error).message}`);
    });
  }
}
