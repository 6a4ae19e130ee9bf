import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { migrations } from '../../migrations';
import { idempotencyMigrations } from 'safe-retries';
import { keyId, keyIdSql } from '../../packages/idempotency/src/key-id';
import { TestDatabase, createTestDatabase } from '../support/database';

/** The idempotency table's migrations keep what a running service has stored. */
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

  it('refuses to revert the hashing while keys are stored, and reverts an empty table', async () => {
    const own = await createTestDatabase();
    try {
      // The module's migrations up to the hashing, which is then the last one to undo.
      const upToHashed = idempotencyMigrations.slice(0, idempotencyMigrations.findIndex((m) => m.name.startsWith('IdempotencyKeysHashed')) + 1);
      const ds = await new DataSource({ type: 'postgres', url: own.url, migrations: upToHashed, migrationsTableName: 'migrations' }).initialize();
      try {
        await ds.runMigrations();
        await ds.query(`INSERT INTO idempotency_keys (id, fingerprint, lease, expires_at) VALUES ($1, substring(sha256('c') FROM 1 FOR 16), 3, now())`, [keyId('42', 'k')]);
        await expect(ds.undoLastMigration()).rejects.toThrow(/cannot be reverted while idempotency_keys holds keys \(1\)/);
        expect(await ds.query('SELECT count(*)::int AS n FROM idempotency_keys')).toEqual([{ n: 1 }]);
        await ds.query('DELETE FROM idempotency_keys');
        await ds.undoLastMigration();
        await ds.query(`INSERT INTO idempotency_keys (client_id, key, fingerprint, lease, expires_at) VALUES ('42', 'k', sha256('c'), 3, now())`);
      } finally {
        await ds.destroy();
      }
    } finally {
      await own.drop();
    }
  });

  it('creates the processed-messages table, then the outbox, and drops each on the way down', async () => {
    const own = await createTestDatabase();
    try {
      const ds = await new DataSource({ type: 'postgres', url: own.url, migrations: idempotencyMigrations }).initialize();
      try {
        await ds.runMigrations();
        expect(
          await ds.query(
            `SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns
              WHERE table_name = 'idempotency_messages' ORDER BY ordinal_position`,
          ),
        ).toEqual([
          { column_name: 'processed_at', data_type: 'timestamp with time zone', is_nullable: 'NO', column_default: 'now()' },
          { column_name: 'expires_at', data_type: 'timestamp with time zone', is_nullable: 'NO', column_default: null },
          { column_name: 'source', data_type: 'text', is_nullable: 'NO', column_default: null },
          { column_name: 'message_id', data_type: 'text', is_nullable: 'NO', column_default: null },
        ]);
        expect(await ds.query(`SELECT indexdef FROM pg_indexes WHERE tablename = 'idempotency_messages' ORDER BY indexname`)).toEqual([
          { indexdef: 'CREATE INDEX idempotency_messages_expires_at_idx ON public.idempotency_messages USING btree (expires_at)' },
          { indexdef: 'CREATE UNIQUE INDEX idempotency_messages_pkey ON public.idempotency_messages USING btree (source, message_id)' },
        ]);
        expect(await ds.query(`SELECT indexname FROM pg_indexes WHERE tablename = 'idempotency_outbox' ORDER BY indexname`)).toEqual(
          ['delivered_at_idx', 'due_idx', 'pkey', 'stream_idx'].map((i) => ({ indexname: `idempotency_outbox_${i}` })),
        );
        await ds.undoLastMigration();
        expect(await ds.query(`SELECT to_regclass('idempotency_outbox') AS t`)).toEqual([{ t: null }]);
        expect(await ds.query(`SELECT to_regclass('idempotency_messages') IS NOT NULL AS t`)).toEqual([{ t: true }]);
        await ds.undoLastMigration();
        expect(await ds.query(`SELECT to_regclass('idempotency_messages') AS t`)).toEqual([{ t: null }]);
        expect(await ds.query(`SELECT to_regclass('idempotency_keys') IS NOT NULL AS t`)).toEqual([{ t: true }]);
      } finally {
        await ds.destroy();
      }
    } finally {
      await own.drop();
    }
  });

  it('computes the same key id in SQL as in the module', async () => {
    const pairs: [string, string][] = [
      ['42', 'k'],
      [randomUUID(), randomUUID()],
      ['acct_9f3', 'order-1 "quoted" \\ key'],
      ['ünïcødé-प्रधान-🙂', 'x'.repeat(255)],
    ];
    for (const [scope, key] of pairs) {
      const [{ id }] = await query<{ id: string }>(`SELECT ${keyIdSql('$1::text', '$2::text')} AS id`, [scope, key]);
      expect(id).toBe(keyId(scope, key));
    }
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
        await query(readFileSync(join(__dirname, '../../packages/idempotency/sql/idempotency-keys.sql'), 'utf8'), [], plain.url);
        const fromSql = await describe(plain.url);
        expect(fromSql.columns).toHaveLength(8);
        expect(fromSql).toEqual(await describe(fresh.url));
      } finally {
        await fresh.drop();
      }
    } finally {
      await plain.drop();
    }
  });
});
