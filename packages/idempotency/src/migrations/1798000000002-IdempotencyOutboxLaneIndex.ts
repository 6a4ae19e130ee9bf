import { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyTable } from '../config/idempotency-table';

/**
 * The partial index the relay's claim reads the waiting messages through, by
 * lane (see OutboxRelay): the lanes with a message due, one index probe
 * each, and the oldest few due of each, so a claim reads what it can take,
 * not every due message however many wait.
 */
export const idempotencyOutboxLaneIndex = (t: IdempotencyTable) =>
  class IdempotencyOutboxLaneIndex1798000000002 implements MigrationInterface {
    name = 'IdempotencyOutboxLaneIndex1798000000002';

    async up(q: QueryRunner): Promise<void> {
      await q.query(`CREATE INDEX ${t.part('lane_due_idx')} ON ${t.sql} (lane, next_attempt_at, seq) WHERE delivered_at IS NULL AND dead_at IS NULL`);
    }

    async down(q: QueryRunner): Promise<void> {
      await q.query(`DROP INDEX ${t.qualifiedPart('lane_due_idx')}`);
    }
  };
