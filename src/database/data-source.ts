import { DataSource, MigrationExecutor } from 'typeorm';
import { PostgresDataSourceOptions } from 'typeorm/driver/postgres/PostgresDataSourceOptions';
import { migrations } from '../../migrations';
import { idempotencyKeyEntity } from 'safe-retries/migrations';

/**
 * One place that says how we talk to PostgreSQL. Migrations are given as classes,
 * not a glob: TypeORM 1.x loads globs with import(), which fails inside jest.
 *
 * The data source reaches the primary only. Read replicas have pools of their
 * own (ReadReplicas), read only by SqlRepository.replicaRows: TypeORM's
 * replication would send every SELECT of a query builder or a find() to a
 * replica by default (an API key revoked a moment ago, a key of idempotency,
 * read from a server seconds behind), and would not say which replica failed.
 */
export function dataSourceOptions(url: string, poolSize: number, deadlineMs: number): PostgresDataSourceOptions {
  return {
    type: 'postgres',
    url,
    synchronize: false,
    migrationsRun: false,
    migrations,
    // The module's table, so that migration:generate compares it too; the
    // features' entities come through TypeOrmModule.forFeature (autoLoadEntities).
    entities: [idempotencyKeyEntity()],
    migrationsTableName: 'migrations',
    migrationsTransactionMode: 'all',
    extra: {
      max: poolSize,
      // A statement waits its turn for a connection of the pool, then for its answer,
      // each at most the request's deadline (DatabaseModuleOptions.deadlineMs): a burst
      // the database serves within it queues (here, or in a transaction pooler's queue,
      // which counts in the read timeout) instead of failing. node-postgres cannot bound
      // one request's wait by what is left of its deadline (Pool.connect() takes no
      // timeout and no signal, and TypeORM takes each transaction's client with it), so
      // every wait gets the whole deadline: the longest a request may be kept, never
      // longer. An outage still ends in 503: a refused connection fails at once; a
      // frozen or partitioned server at the deadline.
      connectionTimeoutMillis: deadlineMs,
      query_timeout: deadlineMs,
      keepAlive: true,
      application_name: 'safe-retries',
      // A client sends a statement without waiting for the answer to the one before
      // (node-postgres pipelining): the idempotency module sends a key's last write
      // with its COMMIT, and a one-commit claim with its read, one round trip each.
      // Every statement still has its own answer. Nothing here uses cursors or
      // streams, which a pipelined client refuses.
      pipeline: true,
    },
  };
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
