import { createHash, randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { migrations } from '../../migrations';
import { keyId } from '../../packages/idempotency/test/support/keys-table';
import { TestDatabase, createTestDatabase } from '../support/database';

/**
 * The idempotency table's migrations keep what a running service has stored (the module's
 * own migrations alone: packages/idempotency/test/migrations/migrations.spec.ts).
 */
describe('idempotency_keys migrations (e2e)', () => {
  const sha = (s: string) => createHash('sha256').update(s).digest();
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

  it('upgrades a database of the service: keys hashed, every stored key, fingerprint, recovery point and grant kept', async () => {
    // The schema the service had before the module shipped its migrations: its
    // PaymentPhases migration then added the recovery column and index itself.
    await migrate(migrations.filter((m) => timestamp(m) < 1764460800004));
    await query('ALTER TABLE idempotency_keys ADD COLUMN recovery jsonb');
    await query('CREATE INDEX idempotency_keys_recovery_idx ON idempotency_keys (lease) WHERE recovery IS NOT NULL');
    await query(`DO $$ BEGIN CREATE ROLE keys_reader NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
    await query('GRANT SELECT ON idempotency_keys TO keys_reader');
    const client = randomUUID();
    await query(
      `INSERT INTO idempotency_keys (client_id, key, fingerprint, lease, expires_at, status, body, recovery)
       VALUES ($1, 'done', sha256('a'), 1, now() + interval '1 day', 201, '{"id":1}', NULL),
              ($1, 'running', sha256('b'), 2, now() + interval '1 day', NULL, NULL, '{"point":"started"}')`,
      [client],
    );
    // Up to the migration before the hashing: client_id becomes text, nothing else changes.
    const hashed = migrations.findIndex((m) => m.name.startsWith('IdempotencyKeysHashed'));
    await migrate(migrations.slice(0, hashed));
    const [{ type }] = await query<{ type: string }>(
      `SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute WHERE attrelid = 'idempotency_keys'::regclass AND attname = 'client_id'`,
    );
    expect(type).toBe('text');
    const [done, running] = await query<{ expires_at: Date }>('SELECT * FROM idempotency_keys ORDER BY key');

    await migrate(migrations);

    const after = await query('SELECT * FROM idempotency_keys WHERE id = $1 OR id = $2 ORDER BY lease', [keyId(client, 'done'), keyId(client, 'running')]);
    expect(after).toEqual([
      { id: keyId(client, 'done'), lease: '1', expires_at: done!.expires_at, status: 201, fingerprint: sha('a').subarray(0, 16), body: '{"id":1}', headers: null, recovery: null },
      {
        id: keyId(client, 'running'),
        lease: '2',
        expires_at: running!.expires_at,
        status: null,
        fingerprint: sha('b').subarray(0, 16),
        body: null,
        headers: null,
        recovery: { point: 'started', scope: client, key: 'running' },
      },
    ]);
    const [{ granted }] = await query<{ granted: boolean }>(`SELECT has_table_privilege('keys_reader', 'idempotency_keys', 'SELECT') AS granted`);
    expect(granted).toBe(true);
    // Any scope, any key, after the upgrade too.
    await expect(
      query(`INSERT INTO idempotency_keys (id, fingerprint, lease, expires_at) VALUES ($1, sha256('c'), 3, now())`, [keyId('acct_9f3', 'done')]),
    ).rejects.toThrow(/fingerprint_length/);
    await query(`INSERT INTO idempotency_keys (id, fingerprint, lease, expires_at) VALUES ($1, substring(sha256('c') FROM 1 FOR 16), 3, now())`, [keyId('acct_9f3', 'done')]);
  });
});
