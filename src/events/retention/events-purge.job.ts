import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { InjectDataSource } from '@nestjs/typeorm';
import { CronJob } from 'cron';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../../config/config';
import { APP_CONFIG } from '../../config/config.module';
import { BackgroundConnections } from '../../database/background-connections';
import { EventsPurgeRepository, PurgedKind } from './events-purge.repository';

/** How long events, delivery attempts and webhook dead letters are kept, each from its own outcome. */
export const EVENTS_RETENTION_DAYS = 30;
const RETENTION_MS = EVENTS_RETENTION_DAYS * 24 * 60 * 60_000;
/** Rows per DELETE, each its own short autocommit statement. */
const BATCH_SIZE = 1_000;
/** One run's time; the next run goes on from the oldest rows. */
const BUDGET_MS = 60_000;
/** The name of the job in SchedulerRegistry. */
export const EVENTS_PURGE_JOB_NAME = 'events-purge';
/** Advisory lock of this purge: apart from the idempotency module's (0x5afe0001 migrations, 0x5afe0002 its purge). */
export const EVENTS_PURGE_LOCK_ID = 0x5afe_e001;

export interface EventsPurgeResult {
  events: number;
  attempts: number;
  deadLetters: number;
  /** DELETE statements run. */
  batches: number;
  durationMs: number;
  /** Another run (in this process or another instance) was purging: nothing was done. */
  skipped: boolean;
}

/**
 * The purge of the clients' webhook history: events, delivery attempts and
 * webhook dead letters, each EVENTS_RETENTION_DAYS after its outcome on the
 * database's clock (an event's creation, an attempt's end, a dead letter's
 * death), in batches (EventsPurgeRepository). An event stays while any of its
 * attempts is kept or a delivery of it is waiting or dead, so what the API
 * lists of it is whole, and a queued delivery finds its event. Like
 * the keys' purge, it is housekeeping: late, skipped or cut short, it loses
 * nothing but disk.
 *
 * - The schedule is the keys' purge's (the idempotency module's `purge.cron`
 *   and `purge.enabled`, from IDEMPOTENCY_RETENTION and IDEMPOTENCY_JOBS): the
 *   module offers no hook into its own job, so this one runs beside it.
 * - Every instance schedules it; a transaction-level advisory lock
 *   (EVENTS_PURGE_LOCK_ID), held by a transaction of its own on a connection
 *   of its own for the run, lets one work and the others skip at once. Nothing
 *   relies on a session, so it holds through a transaction pooler too.
 * - Batches round-robin over the three kinds until each comes back short or
 *   the budget is spent. Each batch takes a turn of BackgroundConnections:
 *   with the lock's connection, the run never holds more than two of the pool.
 */
@Injectable()
export class EventsPurgeJob implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('EventsPurge');
  private inFlight?: Promise<EventsPurgeResult>;
  private stopping = false;

  constructor(
    private readonly purge: EventsPurgeRepository,
    private readonly connections: BackgroundConnections,
    private readonly scheduler: SchedulerRegistry,
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    const { enabled, cron } = this.config.idempotency.purge;
    if (!enabled) return;
    this.scheduler.addCronJob(EVENTS_PURGE_JOB_NAME, CronJob.from({ cronTime: cron, onTick: () => this.runScheduled(), start: true }));
    this.logger.log(`purge of events past their ${EVENTS_RETENTION_DAYS} days scheduled (${cron})`);
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    if (this.scheduler.doesExist('cron', EVENTS_PURGE_JOB_NAME)) this.scheduler.deleteCronJob(EVENTS_PURGE_JOB_NAME);
    await this.inFlight?.catch(() => undefined);
  }

  private async runScheduled(): Promise<void> {
    try {
      await this.purgeOnce();
    } catch (error) {
      this.logger.error(`purge of events failed: ${(error as Error).message}`);
    }
  }

  /** One run: skips (`skipped: true`) when a run is going in this process or another instance holds the lock; rejects when the database fails. */
  purgeOnce(): Promise<EventsPurgeResult> {
    if (this.inFlight) return Promise.resolve({ events: 0, attempts: 0, deadLetters: 0, batches: 0, durationMs: 0, skipped: true });
    const run = this.run().finally(() => {
      this.inFlight = undefined;
    });
    this.inFlight = run;
    return run;
  }

  private async run(): Promise<EventsPurgeResult> {
    const started = performance.now();
    const elapsedMs = () => Math.round(performance.now() - started);
    const lock = this.dataSource.createQueryRunner('master');
    try {
      await lock.startTransaction();
      const [{ locked }] = (await lock.query('SELECT pg_try_advisory_xact_lock($1) AS locked', [EVENTS_PURGE_LOCK_ID])) as { locked: boolean }[];
      if (!locked) return { events: 0, attempts: 0, deadLetters: 0, batches: 0, durationMs: elapsedMs(), skipped: true };
      const counts = await this.batches(elapsedMs);
      const result = { ...counts, durationMs: elapsedMs(), skipped: false };
      if (counts.events + counts.attempts + counts.deadLetters > 0) this.logger.log(`purged ${describePurge(result)}`);
      return result;
    } finally {
      // Ends the lock's transaction (it wrote nothing), which frees the lock.
      if (lock.isTransactionActive) await lock.rollbackTransaction().catch(() => undefined);
      await lock.release();
    }
  }

  private async batches(elapsedMs: () => number): Promise<Omit<EventsPurgeResult, 'durationMs' | 'skipped'>> {
    const counts = { events: 0, attempts: 0, deadLetters: 0, batches: 0 };
    // Attempts and dead letters first: an event goes only once they have. While
    // they are still going, events come round again, as each batch may free some.
    const pending: PurgedKind[] = ['attempts', 'deadLetters', 'events'];
    for (let kind = pending.shift(); kind !== undefined; kind = pending.shift()) {
      const deleted = await this.connections.run(() => this.purge.purgeBatch(kind, BATCH_SIZE, RETENTION_MS));
      counts[kind] += deleted;
      counts.batches += 1;
      if (deleted >= BATCH_SIZE || (kind === 'events' && pending.length > 0)) pending.push(kind);
      if (elapsedMs() >= BUDGET_MS || this.stopping) break;
    }
    return counts;
  }
}

/** "3 events, 7 delivery attempts and 1 webhook dead letters in 12 ms" */
export function describePurge(r: EventsPurgeResult): string {
  return `${r.events} events, ${r.attempts} delivery attempts and ${r.deadLetters} webhook dead letters in ${r.durationMs} ms`;
}
