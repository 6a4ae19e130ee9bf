import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { migrations } from '../../migrations';
import { idempotencyMigrations } from '../../src/idempotency';
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
  const query = async <T>(sql: string, params: unknown[] = [], url = db.url): Promise<T[]> => {
    const ds = await new DataSource({ type: 'postgres', url }).initialize();
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

  it('upgrades a database of the service: client_id becomes text, every stored key and recovery point kept', async () => {
    // The schema the service had before the module shipped its migrations: its
    // PaymentPhases migration then added the recovery column and index itself.
    await migrate(migrations.filter((m) => timestamp(m) < 1764460800004));
    await query('ALTER TABLE idempotency_keys ADD COLUMN recovery jsonb');
    await query('CREATE INDEX idempotency_keys_recovery_idx ON idempotency_keys (lease) WHERE recovery IS NOT NULL');
    const client = randomUUID();
    await query(
      `INSERT INTO idempotency_keys (client_id, key, fingerprint, lease, expires_at, status, body, recovery)
       VALUES ($1, 'done', sha256('a'), 1, now() + interval '1 day', 201, '{"id":1}', NULL),
              ($1, 'running', sha256('b'), 2, now() + interval '1 day', NULL, NULL, '{"point":"started"}')`,
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

  it('ships plain SQL that makes the same table as its migrations', async () => {
    const plain = await createTestDatabase();
    try {
      const fresh = await createTestDatabase();
      try {
        const describe = async (url: string) => ({
          columns: await query(
            `SELECT column_name, data_type, is_nullable, ordinal_position FROM information_schema.columns
              WHERE table_name = 'idempotency_keys' ORDER BY ordinal_position`, [], url),
          indexes: await query(`SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'idempotency_keys' ORDER BY indexname`, [], url),
          constraints: await query(
            `SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = 'idempotency_keys'::regclass ORDER BY conname`, [], url),
        });
        const ds = await new DataSource({ type: 'postgres', url: fresh.url, migrations: idempotencyMigrations }).initialize();
        await ds.runMigrations().finally(() => ds.destroy());
        await query(readFileSync(join(__dirname, '../../src/idempotency/sql/idempotency-keys.sql'), 'utf8'), [], plain.url);
        const fromSql = await describe(plain.url);
        expect(fromSql.columns).toHaveLength(9);
        expect(fromSql).toEqual(await describe(fresh.url));
      } finally {
        await fresh.drop();
      }
    } finally {
      await plain.drop();
    }
  });
});
