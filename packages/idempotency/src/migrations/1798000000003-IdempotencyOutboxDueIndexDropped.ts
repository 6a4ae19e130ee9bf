import { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyTable } from '../config/idempotency-table';

/**
 * Drops the waiting messages' index by due time (`due_idx`): the claim reads
 * every step through `lane_due_idx` or a message's key. Both are partial
 * indexes of the waiting messages, which a healthy outbox's statistics count
 * as almost none; while both existed, a burst's claim was planned on the
 * smaller one, scanning every due message for each lane it probed.
 */
export const idempotencyOutboxDueIndexDropped = (t: IdempotencyTable) =>
  class IdempotencyOutboxDueIndexDropped1798000000003 implements MigrationInterface {
    name = 'IdempotencyOutboxDueIndexDropped1798000000003';

    async up(q: QueryRunner): Promise<void> {
      await q.query(`DROP INDEX ${t.qualifiedPart('due_idx')}`);
    }

    async down(q: QueryRunner): Promise<void> {
      await q.query(`CREATE INDEX ${t.part('due_idx')} ON ${t.sql} (next_attempt_at) WHERE delivered_at IS NULL AND dead_at IS NULL`);
    }
  };
