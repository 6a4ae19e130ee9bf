import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { isDatabaseUnavailable } from '../../src/database/database-errors';
import { SqlRepository } from '../../src/database/sql-repository';
import { TestDatabase, createTestDatabase } from '../support/database';

const INSERT = 'INSERT INTO items (id, v) VALUES ($1, $2) RETURNING id, v';
const UPDATE = 'UPDATE items SET v = $2 WHERE id = $1 RETURNING id, v';

/** A repository of the test's own table, through the base every feature repository extends. */
class ItemsRepository extends SqlRepository {
  insert(id: number, v: string) {
    return this.rows<{ id: number; v: string }>(INSERT, [id, v]);
  }
  update(id: number, v: string) {
    return this.rows<{ id: number; v: string }>(UPDATE, [id, v]);
  }
}

/** SqlRepository on a "transaction host" whose ambient EntityManager the test sets; named statements unless `prepared` is false. */
function repositoryOn(manager: () => EntityManager, prepared = true): ItemsRepository {
  const host = {
    get tx() {
      return manager();
    },
  } as unknown as TransactionHost<TransactionalAdapterTypeOrm>;
  return new (ItemsRepository as unknown as new (host: TransactionHost<TransactionalAdapterTypeOrm>, prepared: boolean) => ItemsRepository)(host, prepared);
}

describe('SqlRepository: prepared statements on the ambient transaction or the pool', () => {
  let db: TestDatabase;
  let dataSource: DataSource;

  /** What the connection running `runner` has prepared (a session's own view). */
  const prepared = async (runner: QueryRunner) =>
    ((await runner.query('SELECT statement FROM pg_prepared_statements WHERE from_sql = false ORDER BY statement')) as { statement: string }[]).map(
      (r) => r.statement,
    );

  beforeAll(async () => {
    db = await createTestDatabase();
    dataSource = new DataSource({ type: 'postgres', url: db.url, extra: { max: 2 } });
    await dataSource.initialize();
    await dataSource.query('CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL)');
  });
  afterAll(async () => {
    await dataSource?.destroy();
    await db?.drop();
  });

  it("in a transaction: runs on the transaction's connection, prepared there once, and answers rows for UPDATE too", async () => {
    const runner = dataSource.createQueryRunner();
    await runner.connect();
    try {
      const repo = repositoryOn(() => runner.manager);
      await runner.startTransaction();
      expect(await repo.insert(1, 'a')).toEqual([{ id: 1, v: 'a' }]);
      expect(await repo.update(1, 'b')).toEqual([{ id: 1, v: 'b' }]);
      expect(await repo.update(1, 'c')).toEqual([{ id: 1, v: 'c' }]);
      expect(await repo.update(2, 'x')).toEqual([]);
      // Another connection sees nothing before the commit: the statements ran in the transaction.
      expect(await dataSource.query('SELECT count(*)::int AS n FROM items')).toEqual([{ n: 0 }]);
      await runner.commitTransaction();
      expect(await prepared(runner)).toEqual([INSERT, UPDATE]);
    } finally {
      await runner.release();
    }
    expect(await dataSource.query('SELECT id, v FROM items')).toEqual([{ id: 1, v: 'c' }]);
  });

  it('outside a transaction: runs on the pool, prepared on the pooled connection', async () => {
    // One pooled connection: the repository's statements and the check run on it.
    const single = new DataSource({ type: 'postgres', url: db.url, extra: { max: 1 } });
    await single.initialize();
    try {
      const repo = repositoryOn(() => single.manager);
      expect(await repo.insert(10, 'p')).toEqual([{ id: 10, v: 'p' }]);
      expect(await repo.update(10, 'q')).toEqual([{ id: 10, v: 'q' }]);
      const runner = single.createQueryRunner();
      try {
        expect(await prepared(runner)).toEqual([INSERT, UPDATE]);
      } finally {
        await runner.release();
      }
    } finally {
      await single.destroy();
    }
  });

  it('with prepared statements off (behind a transaction pooler): sends them unnamed, nothing stays prepared', async () => {
    // A connection of its own: the other tests' connections have these texts prepared.
    const fresh = new DataSource({ type: 'postgres', url: db.url, extra: { max: 1 } });
    await fresh.initialize();
    const runner = fresh.createQueryRunner();
    await runner.connect();
    try {
      const repo = repositoryOn(() => runner.manager, false);
      await runner.startTransaction();
      expect(await repo.insert(30, 'u')).toEqual([{ id: 30, v: 'u' }]);
      expect(await repo.update(30, 'w')).toEqual([{ id: 30, v: 'w' }]);
      await runner.commitTransaction();
      expect(await prepared(runner)).toEqual([]);
    } finally {
      await runner.release();
      await fresh.destroy();
    }
  });

  it('a transaction whose connection is gone fails as "database unavailable", as a TypeORM query would', async () => {
    const runner = dataSource.createQueryRunner();
    await runner.connect();
    await runner.release();
    const failure = await repositoryOn(() => runner.manager)
      .insert(20, 'z')
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(failure).toBeInstanceOf(Error);
    expect(isDatabaseUnavailable(failure)).toBe(true);
  });
});
