import { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyTable } from '../config/idempotency-table';

/** The keys table as first released (client_id then uuid; see IdempotencyKeysAnyScope). */
export const createIdempotencyKeys = (t: IdempotencyTable) =>
  class CreateIdempotencyKeys1764460800001 implements MigrationInterface {
    name = 'CreateIdempotencyKeys1764460800001';

    async up(q: QueryRunner): Promise<void> {
      await q.query(`
      CREATE TABLE ${t.sql} (
        client_id uuid NOT NULL,
        key text NOT NULL,
        fingerprint bytea NOT NULL,
        lease bigint NOT NULL,
        expires_at timestamptz NOT NULL,
        status smallint,
        body text,
        headers text,
        CONSTRAINT ${t.part('pkey')} PRIMARY KEY (client_id, key),
        CONSTRAINT ${t.part('fingerprint_length')} CHECK (octet_length(fingerprint) = 32)
      )`);
      await q.query(`CREATE INDEX ${t.part('expires_at_idx')} ON ${t.sql} (expires_at)`);
    }

    async down(q: QueryRunner): Promise<void> {
      await q.query(`DROP TABLE ${t.sql}`);
    }
  };
