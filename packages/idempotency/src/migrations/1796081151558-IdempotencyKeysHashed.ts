import { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyTable } from '../config/idempotency-table';
import { keyIdSql } from '../contract/key-id';

/**
 * Keys are stored hashed: one 16-byte `id` (keyId: SHA-256 of scope and key,
 * cut to 128 bits) replaces `client_id` and `key` as the primary key, and the
 * fingerprint keeps its first 16 bytes (the fingerprint is now defined as
 * exactly that, so every stored key still matches its retries). A recovery
 * point keeps its scope and key inside its JSON, where the recovery job reads
 * them. The table is rebuilt rather than altered, so that migrated databases
 * get the same column order as new ones (fixed-width columns first: no
 * alignment padding).
 *
 * Every stored key is kept, and so are the table's grants (roles given rights
 * by default privileges get them on the new table anyway). The rebuild holds an exclusive lock on the table
 * for its duration (about 6 s per million keys on a 2-core machine, PostgreSQL 15): run it with the old
 * release stopped, whose statements name the dropped columns.
 *
 * `down` cannot turn hashes back into keys: it refuses while the table holds
 * any row (purge or empty it first, accepting that retries of those keys run
 * again).
 */
export const idempotencyKeysHashed = (t: IdempotencyTable) =>
  class IdempotencyKeysHashed1796081151558 implements MigrationInterface {
    name = 'IdempotencyKeysHashed1796081151558';

    async up(q: QueryRunner): Promise<void> {
      const grants: { privilege: string; grantee: string }[] = await q.query(
        `SELECT a.privilege_type AS privilege, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END AS grantee
           FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a LEFT JOIN pg_roles r ON r.oid = a.grantee
          WHERE c.oid = $1::regclass AND a.grantee <> c.relowner`,
        [t.sql],
      );
      // The old table steps aside, so that the new one is created under its own name
      // (constraint names derive from it), and frees the names the new one takes: its
      // indexes' and, on PostgreSQL 18, its NOT NULL constraints' (named, unique per schema).
      const old = t.qualifiedPart('unhashed');
      await q.query(`ALTER TABLE ${t.sql} RENAME TO ${t.part('unhashed')}`);
      await q.query(
        `ALTER TABLE ${old} DROP CONSTRAINT ${t.part('pkey')}, ALTER COLUMN fingerprint DROP NOT NULL,
           ALTER COLUMN lease DROP NOT NULL, ALTER COLUMN expires_at DROP NOT NULL`,
      );
      await q.query(`DROP INDEX ${t.qualifiedPart('expires_at_idx')}, ${t.qualifiedPart('recovery_idx')}`);
      await createTable(q, t, 16);
      await q.query(`
      INSERT INTO ${t.sql} (id, lease, expires_at, status, fingerprint, body, headers, recovery)
      SELECT ${keyIdSql('client_id', 'key')}, lease, expires_at, status, substring(fingerprint FROM 1 FOR 16), body, headers,
             recovery || jsonb_build_object('scope', client_id, 'key', key)
        FROM ${old}`);
      await q.query(`DROP TABLE ${old}`);
      for (const g of grants) await q.query(`GRANT ${g.privilege} ON ${t.sql} TO ${g.grantee}`);
    }

    async down(q: QueryRunner): Promise<void> {
      const [{ n }]: { n: number }[] = await q.query(`SELECT count(*)::int AS n FROM ${t.sql}`);
      if (n > 0) {
        throw new Error(
          `IdempotencyKeysHashed cannot be reverted while ${t.name} holds keys (${n}): their scopes and keys are stored hashed. Empty the table first.`,
        );
      }
      await q.query(`DROP TABLE ${t.sql}`);
      await createTable(q, t, 32);
    }
  };

/** The table as of this migration (fingerprint 16 bytes, id) or as before it (32 bytes, client_id and key). */
async function createTable(q: QueryRunner, t: IdempotencyTable, fingerprintBytes: 16 | 32): Promise<void> {
  const identity = fingerprintBytes === 16 ? 'id uuid NOT NULL,' : 'client_id text NOT NULL, key text NOT NULL,';
  const columns =
    fingerprintBytes === 16
      ? 'lease bigint NOT NULL, expires_at timestamptz NOT NULL, status smallint, fingerprint bytea NOT NULL,'
      : 'fingerprint bytea NOT NULL, lease bigint NOT NULL, expires_at timestamptz NOT NULL, status smallint,';
  await q.query(`
    CREATE TABLE ${t.sql} (
      ${identity}
      ${columns}
      body text,
      headers text,
      recovery jsonb,
      CONSTRAINT ${t.part('pkey')} PRIMARY KEY ${fingerprintBytes === 16 ? '(id)' : '(client_id, key)'},
      CONSTRAINT ${t.part('fingerprint_length')} CHECK (octet_length(fingerprint) = ${fingerprintBytes})
    )`);
  await q.query(`CREATE INDEX ${t.part('expires_at_idx')} ON ${t.sql} (expires_at)`);
  await q.query(`CREATE INDEX ${t.part('recovery_idx')} ON ${t.sql} (lease) WHERE recovery IS NOT NULL`);
}
