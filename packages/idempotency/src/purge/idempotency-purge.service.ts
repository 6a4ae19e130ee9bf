import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { CronJob } from 'cron';
import { DataSource, QueryRunner } from 'typeorm';
import { IdempotencyMetrics } from '../telemetry/idempotency.metrics';
import { purgeStatements } from '../stores/postgres/statements';
import { IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../config/idempotency.options';
import { OutboxMetrics } from '../outbox/outbox-metrics';
import { outboxStatements } from '../outbox/outbox-statements';

/**
 * The purge job: deletes idempotency keys past their retention, and the
 * processed messages of IdempotentConsumer past theirs.
 *
 * Purging is housekeeping, never correctness: a finished key past `expires_at`
 * already behaves as new in the claim (the store's compare-and-set replace), whether or
 * not this job ever runs. So the job may be late, skipped or killed halfway; what
 * it must never do is hurt the request path or a request in flight.
 *
 * - Batches. Each batch is one short autocommit DELETE of at most `batchSize`
 *   rows, so no transaction holds thousands of row locks or a long snapshot
 *   (which would hold back vacuum on a table written by every request), and a
 *   crash loses at most one batch. A run stops when a batch comes back short or
 *   its time budget is spent; the next run continues from the oldest key.
 * - SKIP LOCKED. The rows are picked oldest first through the expires_at index
 *   and locked with FOR UPDATE SKIP LOCKED: a row a claim is replacing or taking
 *   over right now is skipped, never waited for, and the claim never waits for
 *   the purge either (it meets a row that is either still there or already gone;
 *   both are answered correctly). Skipped rows go in a later run.
 * - Only what nothing can resume (REPLACEABLE in postgres/statements.ts, the
 *   claim's own rule). A completed row's `expires_at` is its completion + retention. A row
 *   still in progress is past `expires_at` when its work outlived the retention:
 *   while its owner holds (or renews) the lease it may still complete, and a row
 *   with a recovery point is an operation whose outside effect may have happened
 *   (a charge): deleting either would let a retry run the effect a second time.
 *   So only completed rows, and in-progress rows with no recovery point whose
 *   lease has expired (a crashed owner: its completion is fenced on its token and
 *   fails with LeaseLost once the row is gone), are deleted. The lease is judged
 *   on the database clock, as everywhere else.
 * - Processed messages. A message row past `expires_at` only makes a redelivery
 *   count as already processed; gone, the redelivery is processed again, which
 *   is what its retention promises. A row is committed with its message's effect,
 *   so no lease protects it: every row past `expires_at` goes, in batches of the
 *   same size with SKIP LOCKED. The run alternates a batch of keys and a batch of
 *   messages, so neither backlog starves the other within the time budget. An app
 *   whose database lacks the messages table (it has not run the module's
 *   CreateIdempotencyMessages migration) still has its keys purged, with a warning.
 * - Delivered outbox messages. A delivered message past `outbox.retention`
 *   (counted from its delivery) is deleted the same way; undelivered ones and
 *   dead letters never are. A database without the outbox table skips it.
 * - The schedule. The job is a cron job of the module's own (the `cron`
 *   package, from `purge.cron`), started once the app has bootstrapped and
 *   stopped before it shuts down: the app registers no scheduler for it, and
 *   the app's own scheduler, if any, is left alone.
 * - The advisory lock. Every instance schedules the job; a
 *   pg_try_advisory_xact_lock lets one of them work and the others skip at once
 *   (no queue of purgers deleting the same rows). It is held by a transaction
 *   of its own, open for the run on a dedicated connection, while the batches
 *   commit one by one on others: nothing relies on a session, so the lock
 *   works the same through a transaction pooler (PgBouncer in transaction
 *   mode), where a session-level lock would stay behind on whichever server
 *   connection took it. The lock's transaction holds no snapshot between its
 *   statements and writes nothing; it ends (and the lock with it) when the run
 *   ends, or when its connection dies. An in-flight flag does the same inside
 *   one process, for a tick that arrives while the previous run is still going.
 */

/** Advisory lock id of the purge; distinct from the migration lock (0x5afe0001). */
export const PURGE_LOCK_ID = 0x5afe_0002;

export interface PurgeResult {
  /** Keys deleted by this run. */
  deleted: number;
  /** Processed messages (IdempotentConsumer) deleted by this run. */
  messages: number;
  /** Delivered outbox messages deleted by this run. */
  outbox: number;
  /** DELETE statements run, of keys and of messages (the last of each deleted fewer than a batch). */
  batches: number;
  durationMs: number;
  /** True when another run (in this process or another instance) was purging: nothing was done. */
  skipped: boolean;
}

@Injectable()
export class IdempotencyPurgeService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('IdempotencyPurge');
  private inFlight?: Promise<PurgeResult>;
  private stopping = false;
  private readonly purgeBatchSql: string;
  private readonly purgeMessagesBatchSql: string;
  private readonly purgeOutboxBatchSql: string;
  private warnedNoMessagesTable = false;
  /** The running schedule; undefined while the job is off or stopped. */
  private job?: CronJob;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly metrics: IdempotencyMetrics,
    private readonly outboxMetrics: OutboxMetrics,
  ) {
    const sql = purgeStatements(options.postgres.table.sql, options.messages.table.sql);
    this.purgeBatchSql = sql.keys;
    this.purgeMessagesBatchSql = sql.messages;
    this.purgeOutboxBatchSql = outboxStatements(options.outbox.table.sql).purge;
  }

  onApplicationBootstrap(): void {
    const { enabled, cron } = this.options.purge;
    if (!enabled) return;
    this.job = CronJob.from({ cronTime: cron, onTick: () => this.runScheduled(), start: true });
    this.logger.log(`purge of expired idempotency keys scheduled (${cron})`);
  }

  /** Whether this process runs the job on its schedule (from bootstrap to shutdown, while enabled). */
  get scheduled(): boolean {
    return this.job !== undefined;
  }

  /** Stops the schedule and lets a running purge end after its current batch, before the data source closes. */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    await this.job?.stop();
    this.job = undefined;
    await this.inFlight?.catch(() => undefined);
  }

  /** The scheduled tick: a failed run is logged and counted, never thrown; the next tick retries. */
  async runScheduled(): Promise<void> {
    try {
      await this.purgeOnce();
    } catch (error) {
      this.logger.error(`purge of expired idempotency keys failed: ${(error as Error).message}`, (error as Error).stack);
    }
  }

  /**
   * One purge run: deletes expired keys in batches until a batch comes back
   * short or the time budget is spent. Skips (resolves `skipped: true`) when a
   * run is already going in this process or another instance holds the lock.
   * Rejects when the database fails (the failure is counted in the metrics).
   */
  purgeOnce(): Promise<PurgeResult> {
    if (this.inFlight) {
      this.logger.debug('skipped: a purge is already running in this process');
      return Promise.resolve({ deleted: 0, messages: 0, outbox: 0, batches: 0, durationMs: 0, skipped: true });
    }
    const run = this.run().finally(() => {
      this.inFlight = undefined;
    });
    this.inFlight = run;
    return run;
  }

  private async run(): Promise<PurgeResult> {
    const started = performance.now();
    const elapsedMs = () => Math.round(performance.now() - started);
    // The lock's transaction, on a connection of its own; the batches run on the pool.
    const lock = this.dataSource.createQueryRunner('master');
    let counts: Omit<PurgeResult, 'durationMs' | 'skipped'>;
    try {
      await lock.startTransaction();
      const [{ locked }] = (await lock.query('SELECT pg_try_advisory_xact_lock($1) AS locked', [PURGE_LOCK_ID])) as {
        locked: boolean;
      }[];
      if (!locked) {
        this.logger.debug('skipped: another instance is purging expired idempotency keys');
        return { deleted: 0, messages: 0, outbox: 0, batches: 0, durationMs: elapsedMs(), skipped: true };
      }
      counts = await this.purgeBatches(elapsedMs);
    } catch (error) {
      this.metrics.purgeFailures.inc();
      throw error;
    } finally {
      // Ends the lock's transaction (it wrote nothing), which frees the lock.
      if (lock.isTransactionActive) await lock.rollbackTransaction().catch(() => undefined);
      await lock.release();
    }

    const durationMs = elapsedMs();
    this.metrics.purgeDuration.observe(durationMs / 1000);
    const { deleted, messages, outbox, batches } = counts;
    const message = `purged ${deleted} expired idempotency keys, ${messages} processed messages and ${outbox} delivered outbox messages in ${batches} batches, ${durationMs} ms`;
    if (deleted + messages + outbox > 0) this.logger.log(message);
    else this.logger.debug(message);
    return { ...counts, durationMs, skipped: false };
  }

  /**
   * One batch of each table in turn, until each has come back short or the
   * time budget is spent; a table is done once a batch of it comes back short.
   */
  private async purgeBatches(elapsedMs: () => number): Promise<Omit<PurgeResult, 'durationMs' | 'skipped'>> {
    const { batchSize, budgetMs } = this.options.purge;
    const counts = { deleted: 0, messages: 0, outbox: 0, batches: 0 };
    const runner = this.dataSource.createQueryRunner('master');
    try {
      const pending: { sql: string; params?: unknown[]; deleted(n: number): void }[] = [
        {
          sql: this.purgeBatchSql,
          deleted: (n) => {
            counts.deleted += n;
            this.metrics.purgedKeys.inc(n);
          },
        },
      ];
      if (await this.messagesTableExists(runner)) {
        pending.push({
          sql: this.purgeMessagesBatchSql,
          deleted: (n) => {
            counts.messages += n;
            this.metrics.purgedMessages.inc(n);
          },
        });
      }
      if (await this.tableExists(runner, this.options.outbox.table.sql)) {
        pending.push({
          sql: this.purgeOutboxBatchSql,
          params: [this.options.outbox.retentionMs],
          deleted: (n) => {
            counts.outbox += n;
            this.outboxMetrics.purged.inc(n);
          },
        });
      }
      for (let table = pending.shift(); table !== undefined; table = pending.shift()) {
        const { affected = 0 } = await runner.query(table.sql, [batchSize, ...(table.params ?? [])], true);
        counts.batches += 1;
        table.deleted(affected);
        if (affected >= batchSize) pending.push(table);
        if (elapsedMs() >= budgetMs || this.stopping) break;
      }
    } finally {
      await runner.release();
    }
    return counts;
  }

  /** Whether the messages table exists; warns once per process when it does not (see the header). */
  private async messagesTableExists(runner: QueryRunner): Promise<boolean> {
    const { table } = this.options.messages;
    const exists = await this.tableExists(runner, table.sql);
    if (!exists && !this.warnedNoMessagesTable) {
      this.warnedNoMessagesTable = true;
      this.logger.warn(
        `the processed-messages table ${table.name} does not exist, so only keys are purged: add the module's migrations ` +
          '(idempotencyMigrations includes CreateIdempotencyMessages1796142644217) to the data source',
      );
    }
    return exists;
  }

  private async tableExists(runner: QueryRunner, table: string): Promise<boolean> {
    const [{ exists }] = (await runner.query('SELECT to_regclass($1) IS NOT NULL AS exists', [table])) as { exists: boolean }[];
    return exists;
  }
}
