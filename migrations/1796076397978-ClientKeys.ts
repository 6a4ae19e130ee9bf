import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Several API keys per client (rotation and revocation): client_keys holds each
 * key's SHA-256, a non-secret prefix, created_at and revoked_at. Every existing
 * clients.key_hash is copied in (active, prefix unknown: only the hash was ever
 * stored), so every current key keeps working; then clients.key_hash is dropped,
 * so the keys live in one place and nothing can read a stale copy.
 */
export class ClientKeys1796076397978 implements MigrationInterface {
  name = 'ClientKeys1796076397978';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE client_keys (
        id uuid NOT NULL DEFAULT gen_random_uuid(),
        client_id uuid NOT NULL,
        key_hash bytea NOT NULL,
        prefix text,
        created_at timestamptz NOT NULL DEFAULT now(),
        revoked_at timestamptz,
        CONSTRAINT client_keys_pkey PRIMARY KEY (id),
        CONSTRAINT client_keys_key_hash_key UNIQUE (key_hash),
        CONSTRAINT client_keys_key_hash_length CHECK (octet_length(key_hash) = 32),
        CONSTRAINT client_keys_client_fkey FOREIGN KEY (client_id) REFERENCES clients (id) ON DELETE CASCADE
      )`);
    await q.query('CREATE INDEX client_keys_client_idx ON client_keys (client_id)');
    await q.query('INSERT INTO client_keys (client_id, key_hash, created_at) SELECT id, key_hash, created_at FROM clients');
    await q.query('ALTER TABLE clients DROP COLUMN key_hash');
  }

  /** Back to one key per client: its newest active key. Fails (NOT NULL) while a client has no active key. */
  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE clients ADD COLUMN key_hash bytea');
    await q.query(`
      UPDATE clients c SET key_hash = (
        SELECT k.key_hash FROM client_keys k WHERE k.client_id = c.id AND k.revoked_at IS NULL ORDER BY k.created_at DESC, k.id LIMIT 1)`);
    await q.query('ALTER TABLE clients ALTER COLUMN key_hash SET NOT NULL');
    await q.query('ALTER TABLE clients ADD CONSTRAINT clients_key_hash_key UNIQUE (key_hash)');
    await q.query('ALTER TABLE clients ADD CONSTRAINT clients_key_hash_length CHECK (octet_length(key_hash) = 32)');
    await q.query('DROP TABLE client_keys');
  }
}
