import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateIdempotencyKeys1764460800001 implements MigrationInterface {
  name = 'CreateIdempotencyKeys1764460800001';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE idempotency_keys (
        client_id uuid NOT NULL,
        key text NOT NULL,
        fingerprint bytea NOT NULL,
        lease bigint NOT NULL,
        expires_at timestamptz NOT NULL,
        status smallint,
        body text,
        headers text,
        CONSTRAINT idempotency_keys_pkey PRIMARY KEY (client_id, key),
        CONSTRAINT idempotency_keys_fingerprint_length CHECK (octet_length(fingerprint) = 32)
      )`);
    await q.query('CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE idempotency_keys');
  }
}
