import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateClients1764460800000 implements MigrationInterface {
  name = 'CreateClients1764460800000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE clients (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        name text NOT NULL,
        key_hash bytea NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT clients_name_key UNIQUE (name),
        CONSTRAINT clients_key_hash_key UNIQUE (key_hash),
        CONSTRAINT clients_key_hash_length CHECK (octet_length(key_hash) = 32)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE clients');
  }
}
