import { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyTable } from '../config/idempotency-table';

/**
 * The outbox (see Outbox and OutboxRelay): one row per message, inserted in
 * the transaction of the effect it announces, delivered by the relay.
 *
 * - `seq` orders the messages of a stream; `id` is the message's identity
 *   downstream (the publisher's idempotency key).
 * - `next_attempt_at` is when the message is next due; while a relay holds it,
 *   the end of that relay's lease. `attempts` counts the claims since the
 *   message was added or replayed, and fences a relay's mark on its own claim.
 * - `retry_from` is when the message was added (or replayed): a failure whose
 *   next attempt would fall past it plus the horizon (`outbox.horizon`) parks
 *   the message (`dead_at`) instead.
 * - The partial index `due` holds only messages waiting for delivery, so the
 *   relay's scan stays small however many delivered rows wait for the purge;
 *   `stream` finds the older undelivered messages of a stream; `delivered_at`
 *   lets the purge find delivered rows past retention.
 */
export const createIdempotencyOutbox = (t: IdempotencyTable) =>
  class CreateIdempotencyOutbox1796500000000 implements MigrationInterface {
    name = 'CreateIdempotencyOutbox1796500000000';

    async up(q: QueryRunner): Promise<void> {
      await q.query(`
      CREATE TABLE ${t.sql} (
        seq bigint GENERATED ALWAYS AS IDENTITY,
        created_at timestamptz NOT NULL DEFAULT now(),
        next_attempt_at timestamptz NOT NULL DEFAULT now(),
        retry_from timestamptz NOT NULL DEFAULT now(),
        delivered_at timestamptz,
        dead_at timestamptz,
        attempts integer NOT NULL DEFAULT 0,
        id uuid NOT NULL DEFAULT gen_random_uuid(),
        topic text NOT NULL,
        stream text,
        payload jsonb NOT NULL,
        last_error text,
        CONSTRAINT ${t.part('pkey')} PRIMARY KEY (id)
      )`);
      await q.query(`CREATE INDEX ${t.part('due_idx')} ON ${t.sql} (next_attempt_at) WHERE delivered_at IS NULL AND dead_at IS NULL`);
      await q.query(`CREATE INDEX ${t.part('stream_idx')} ON ${t.sql} (stream, seq) WHERE delivered_at IS NULL AND stream IS NOT NULL`);
      await q.query(`CREATE INDEX ${t.part('delivered_at_idx')} ON ${t.sql} (delivered_at) WHERE delivered_at IS NOT NULL`);
    }

    async down(q: QueryRunner): Promise<void> {
      await q.query(`DROP TABLE ${t.sql}`);
    }
  };
