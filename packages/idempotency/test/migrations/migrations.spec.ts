import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { idempotencyMigrations } from 'safe-retries/migrations';
import { keyId } from '../support/keys-table';
import { TestDatabase, createDatabase } from '../support/test-services';

/** The module's own migrations and plain SQL, each on a fresh database. */
describe('idempotency migrations (e2e)', () => {
  let db: TestDatabase;
  const query = async <T>(sql: string, params: unknown[] = [], url = db.url): Promise<T[]> => {
    const ds = await new DataSource({ type: 'postgres', url }).initialize();
    try {
      return await ds.query<T[]>(sql, params);
    } finally {
      await ds.destroy();
    }
  };

  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(() => db.drop());

  it('refuses to revert the hashing while keys are stored, and reverts an empty table', async () => {
    const own = await createDatabase();
    try {
      // The module's migrations up to the hashing, which is then the last one to undo.
      const upToHashed = idempotencyMigrations().slice(0, idempotencyMigrations().findIndex((m) => m.name.startsWith('IdempotencyKeysHashed')) + 1);
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

  it('creates the processed-messages table, then the outbox, its lanes and their groups, and drops each on the way down', async () => {
    const own = await createDatabase();
    try {
      const ds = await new DataSource({ type: 'postgres', url: own.url, migrations: idempotencyMigrations() }).initialize();
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
          ['delivered_at_idx', 'lane_due_idx', 'pkey', 'stream_idx'].map((i) => ({ indexname: `idempotency_outbox_${i}` })),
        );
        const lane = `SELECT data_type FROM information_schema.columns WHERE table_name = 'idempotency_outbox' AND column_name = 'lane'`;
        const group = `SELECT data_type FROM information_schema.columns WHERE table_name = 'idempotency_outbox' AND column_name = 'lane_group'`;
        expect(await ds.query(lane)).toEqual([{ data_type: 'text' }]);
        expect(await ds.query(group)).toEqual([{ data_type: 'text' }]);
        const index = (name: string) => `SELECT indexname FROM pg_indexes WHERE tablename = 'idempotency_outbox' AND indexname = 'idempotency_outbox_${name}'`;
        await ds.undoLastMigration();
        expect(await ds.query(index('due_idx'))).toEqual([{ indexname: 'idempotency_outbox_due_idx' }]);
        await ds.undoLastMigration();
        expect(await ds.query(index('lane_due_idx'))).toEqual([]);
        expect(await ds.query(group)).toEqual([{ data_type: 'text' }]);
        await ds.undoLastMigration();
        expect(await ds.query(group)).toEqual([]);
        expect(await ds.query(lane)).toEqual([{ data_type: 'text' }]);
        await ds.undoLastMigration();
        expect(await ds.query(lane)).toEqual([]);
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

  it('hashes the keys a table holds into the id the module names them by: SHA-256(scope, NUL, key)', async () => {
    const pairs: [string, string][] = [
      ['42', 'k'],
      [randomUUID(), randomUUID()],
      ['acct_9f3', 'order-1 "quoted" \\ key'],
      ['ünïcødé-प्रधान-🙂', 'x'.repeat(255)],
    ];
    const own = await createDatabase();
    try {
      // Keys stored in clear by the migrations before the hashing, then the hashing.
      const all = idempotencyMigrations();
      const hashing = all.findIndex((m) => m.name.startsWith('IdempotencyKeysHashed'));
      const migrate = async (upTo: number) => {
        const ds = await new DataSource({ type: 'postgres', url: own.url, migrations: all.slice(0, upTo), migrationsTableName: 'migrations' }).initialize();
        await ds.runMigrations().finally(() => ds.destroy());
      };
      await migrate(hashing);
      for (const [scope, key] of pairs) {
        await query(`INSERT INTO idempotency_keys (client_id, key, fingerprint, lease, expires_at) VALUES ($1, $2, sha256('c'), 3, now() + interval '1 hour')`, [scope, key], own.url);
      }
      await migrate(hashing + 1);
      const ids = await query<{ id: string }>('SELECT id::text AS id FROM idempotency_keys', [], own.url);
      expect(ids.map((r) => r.id).sort()).toEqual(pairs.map(([scope, key]) => keyId(scope, key)).sort());
    } finally {
      await own.drop();
    }
  });

  it('ships plain SQL that makes the same table as its migrations', async () => {
    const plain = await createDatabase();
    try {
      const fresh = await createDatabase();
      try {
        const describe = async (url: string) => ({
          columns: await query(
            `SELECT column_name, data_type, is_nullable, ordinal_position FROM information_schema.columns
              WHERE table_name = 'idempotency_keys' ORDER BY ordinal_position`, [], url),
          indexes: await query(`SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'idempotency_keys' ORDER BY indexname`, [], url),
          constraints: await query(
            `SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = 'idempotency_keys'::regclass ORDER BY conname`, [], url),
        });
        const ds = await new DataSource({ type: 'postgres', url: fresh.url, migrations: idempotencyMigrations() }).initialize();
        await ds.runMigrations().finally(() => ds.destroy());
        await query(readFileSync(join(__dirname, '../../sql/idempotency-keys.sql'), 'utf8'), [], plain.url);
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
