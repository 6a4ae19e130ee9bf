import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { migrations } from '../../migrations';
import { TestDatabase, createTestDatabase } from '../support/database';

/** The idempotency table's migrations keep what a running service has stored. */
describe('idempotency_keys migrations (e2e)', () => {
  let db: TestDatabase;
  const timestamp = (m: { name: string }) => Number(/\d{13}$/.exec(m.name)![0]);
  const migrate = async (list: typeof migrations) => {
    const ds = await new DataSource({ type: 'postgres', url: db.url, migrations: list, migrationsTableName: 'migrations' }).initialize();
    try {
      await ds.runMigrations({ transaction: 'each' });
    } finally {
      await ds.destroy();
    }
  };
  const query = async <T>(sql: string, params: unknown[] = []): Promise<T[]> => {
    const ds = await new DataSource({ type: 'postgres', url: db.url }).initialize();
    try {
      return await ds.query<T[]>(sql, params);
    } finally {
      await ds.destroy();
    }
  };

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  it('turns client_id from uuid into text and keeps every stored key', async () => {
    await migrate(migrations.filter((m) => timestamp(m) < 1764460800004));
    const client = randomUUID();
    await query(
      `INSERT INTO idempotency_keys (client_id, key, fingerprint, lease, expires_at, status, body)
       VALUES ($1, 'done', sha256('a'), 1, now() + interval '1 day', 201, '{"id":1}'),
              ($1, 'running', sha256('b'), 2, now() + interval '1 day', NULL, NULL)`,
      [client],
    );
    const before = await query('SELECT * FROM idempotency_keys ORDER BY key');

    await migrate(migrations);

    const [{ type }] = await query<{ type: string }>(
      `SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute WHERE attrelid = 'idempotency_keys'::regclass AND attname = 'client_id'`,
    );
    expect(type).toBe('text');
    expect(await query('SELECT * FROM idempotency_keys ORDER BY key')).toEqual(before);
    await query(`INSERT INTO idempotency_keys (client_id, key, fingerprint, lease, expires_at) VALUES ('acct_9f3', 'done', sha256('c'), 3, now())`);
  });
});
