import { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyTable } from '../config/idempotency-table';

/**
 * The processed messages of IdempotentConsumer: one row per (source, message
 * id), claimed in the same transaction as the message's effect, kept until
 * `expires_at` and then deleted by the purge job (through the expires_at
 * index). The row is small, it is written for every message: two timestamps
 * first (8-byte aligned right after the row header, no padding), then the two
 * short texts. The primary key is what makes a duplicate find the claim.
 */
export const createIdempotencyMessages = (t: IdempotencyTable) =>
  class CreateIdempotencyMessages1796142644217 implements MigrationInterface {
    name = 'CreateIdempotencyMessages1796142644217';

    async up(q: QueryRunner): Promise<void> {
      await q.query(`
      CREATE TABLE ${t.sql} (
        processed_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        source text NOT NULL,
        message_id text NOT NULL,
        CONSTRAINT ${t.part('pkey')} PRIMARY KEY (source, message_id)
      )`);
      await q.query(`CREATE INDEX ${t.part('expires_at_idx')} ON ${t.sql} (expires_at)`);
    }

    async down(q: QueryRunner): Promise<void> {
      await q.query(`DROP TABLE ${t.sql}`);
    }
  };
