import { DataSource, MigrationExecutor } from 'typeorm';
import { PostgresDataSourceOptions } from 'typeorm/driver/postgres/PostgresDataSourceOptions';
import { migrations } from '../../migrations';
import { IdempotencyKeyEntity } from 'safe-retries';

/**
 * One place that says how we talk to PostgreSQL. Migrations are given as classes,
 * not a glob: TypeORM 1.x loads globs with import(), which fails inside jest.
 *
 * With read replicas, TypeORM's replication: the master is `url`, and
 * `defaultMode: 'master'` keeps every read there unless a caller asks for a
 * replica by name (`createQueryRunner('slave')`, SqlRepository.replicaRows).
 * TypeORM's own default is 'slave' for every SELECT built by a query builder or
 * a repository's find(): an API key revoked or created a moment ago, or a key
 * of idempotency, would then be read from a server seconds behind.
 * Transactions always run on the master.
 */
export function dataSourceOptions(url: string, poolSize: number, replicaUrls: readonly string[] = []): PostgresDataSourceOptions {
  return {
    type: 'postgres',
    ...(replicaUrls.length
      ? { replication: { master: { url }, slaves: replicaUrls.map((replica) => ({ url: replica })), defaultMode: 'master' as const } }
      : { url }),
    synchronize: false,
    migrationsRun: false,
    migrations,
    // The module's table, so that migration:generate compares it too; the
    // features' entities come through TypeOrmModule.forFeature (autoLoadEntities).
    entities: [IdempotencyKeyEntity],
    migrationsTableName: 'migrations',
    migrationsTransactionMode: 'all',
    extra: {
      max: poolSize,
      // A request during an outage fails fast (503) instead of hanging: on a dead
      // server at connect, on a frozen or partitioned one at the read timeout.
      connectionTimeoutMillis: 3_000,
      query_timeout: 30_000,
      keepAlive: true,
      application_name: 'safe-retries',
    },
  };
}

/** The same options on the primary alone (no replica pools): for the migrations. */
export function primaryOnly(options: PostgresDataSourceOptions): PostgresDataSourceOptions {
  const { replication, ...rest } = options;
  return replication ? { ...rest, url: replication.master.url } : options;
}

// Any constant works; it only has to be the same for every instance.
const MIGRATION_LOCK = 0x5afe_0001;

/**
 * Applies pending migrations in one transaction that first takes a
 * transaction-level advisory lock, so instances booting together on one empty
 * database run them once: the others wait for the lock, then find nothing
 * pending (the list of applied migrations is read after the lock, in the same
 * transaction). Nothing relies on the session, so this works the same on a
 * direct connection and through a transaction pooler (PgBouncer in transaction
 * mode), where a session-level lock would stay on whichever server connection
 * took it. All pending migrations commit together or not at all.
 */
export async function runMigrationsLocked(dataSource: DataSource): Promise<string[]> {
  const runner = dataSource.createQueryRunner('master');
  await runner.connect();
  try {
    await runner.startTransaction();
    try {
      await runner.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      const executor = new MigrationExecutor(dataSource, runner);
      executor.transaction = 'all';
      const applied = await executor.executePendingMigrations();
      await runner.commitTransaction();
      return applied.map((m) => m.name);
    } catch (error) {
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      throw error;
    }
  } finally {
    await runner.release();
  }
}
