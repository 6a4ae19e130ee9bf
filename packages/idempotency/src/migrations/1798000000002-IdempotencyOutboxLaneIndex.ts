import { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyTable } from '../config/idempotency-table';

/**
 * The outbox's lane index: a relay's claim finds the lanes with a due message
 * in one descent each, and reads of each only as many as its cap lets it take,
 * however long the lane's backlog (see OutboxRelay).
 */
export const idempotencyOutboxLaneIndex = (t: IdempotencyTable) =>
  class IdempotencyOutboxLaneIndex1798000000002 implements MigrationInterface {
    name = 'IdempotencyOutboxLaneIndex1798000000002';

    async up(q: QueryRunner): Promise<void> {
      await q.query(`CREATE INDEX ${t.part('lane_idx')} ON ${t.sql} (lane, next_attempt_at, seq) WHERE delivered_at IS NULL AND dead_at IS NULL`);
    }

    async down(q: QueryRunner): Promise<void> {
      await q.query(`DROP INDEX ${t.qualifiedPart('lane_idx')}`);
    }
  };
