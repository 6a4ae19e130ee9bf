import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, DataSourceOptions, MigrationExecutor } from 'typeorm';
import { IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../config/idempotency.options';
import { idempotencyMigrations } from './index';

/** Advisory lock id of migrations, the same for the module's and an app's own that take it. */
export const MIGRATION_LOCK_ID = 0x5afe_0001;

/**
 * The module's tables, created and updated at startup (`migrations`, default
 * on), before any route is served.
 *
 * Its migrations run on a connection of their own to the app's database (the
 * primary when the data source has replicas), recorded in the data source's
 * migrations table under their fixed names: a database whose migrations
 * already include them (an app that lists them among its own) runs nothing.
 * All pending ones run in one transaction that first takes a transaction-level
 * advisory lock, so instances booting together on an empty database run them
 * once: the others wait for the lock, then find nothing pending (the applied
 * list is read after the lock, in the same transaction). Nothing relies on the
 * session, so it works the same through a transaction pooler.
 */
@Injectable()
export class IdempotencyMigrator implements OnModuleInit {
  private readonly logger = new Logger('IdempotencyMigrations');

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  async onModuleInit(): Promise<void> {
    if (!this.options.migrations) return;
    const applied = await this.migrate();
    if (applied.length > 0) this.logger.log(`applied: ${applied.join(', ')}`);
  }

  /** Runs the module's pending migrations; the names of those it applied. */
  async migrate(): Promise<string[]> {
    const migrations = idempotencyMigrations(this.options.postgres.table.name, this.options.messages.table.name);
    const migrator = await new DataSource({
      ...primaryOnly(this.dataSource.options),
      migrations,
      entities: [],
      subscribers: [],
      migrationsRun: false,
      synchronize: false,
      poolSize: 1,
    } as DataSourceOptions).initialize();
    try {
      const runner = migrator.createQueryRunner('master');
      try {
        await runner.startTransaction();
        await runner.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_ID]);
        const executor = new MigrationExecutor(migrator, runner);
        executor.transaction = 'all';
        const applied = await executor.executePendingMigrations();
        await runner.commitTransaction();
        return applied.map((m) => m.name);
      } catch (error) {
        if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
        throw error;
      } finally {
        await runner.release();
      }
    } finally {
      await migrator.destroy();
    }
  }
}

/** The data source's options on its primary alone (no replica pools). */
function primaryOnly(options: DataSourceOptions): DataSourceOptions {
  if (options.type !== 'postgres' || !options.replication) return options;
  const { replication, ...rest } = options;
  return { ...rest, ...replication.master };
}
