import { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyTable } from '../config/idempotency-table';

/**
 * Keys are scoped by any principal id (`42`, `acct_9f3`, a UUID), not only a
 * UUID: `client_id` becomes text. Every stored key keeps its value (a UUID's
 * text form is what the store now sends); the primary key is rebuilt with the
 * column. Nothing else depends on the column (no foreign key, no view). `down`
 * fails while any scope is not a UUID.
 */
export const idempotencyKeysAnyScope = (t: IdempotencyTable) =>
  class IdempotencyKeysAnyScope1764460800005 implements MigrationInterface {
    name = 'IdempotencyKeysAnyScope1764460800005';

    async up(q: QueryRunner): Promise<void> {
      await q.query(`ALTER TABLE ${t.sql} ALTER COLUMN client_id TYPE text USING client_id::text`);
    }

    async down(q: QueryRunner): Promise<void> {
      await q.query(`ALTER TABLE ${t.sql} ALTER COLUMN client_id TYPE uuid USING client_id::uuid`);
    }
  };
