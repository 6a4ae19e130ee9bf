import { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyTable } from '../config/idempotency-table';

/**
 * The groups of the outbox's lanes (see OutboxRelay): `lane_group` names the
 * party a message's lane belongs to (one tenant's destinations; NULL: the lane
 * is a group of its own), so that one relay shares its slots among groups
 * before lanes, and holds at most half of them for one group. A column
 * without a default: adding it rewrites no row.
 */
export const idempotencyOutboxLaneGroups = (t: IdempotencyTable) =>
  class IdempotencyOutboxLaneGroups1798000000001 implements MigrationInterface {
    name = 'IdempotencyOutboxLaneGroups1798000000001';

    async up(q: QueryRunner): Promise<void> {
      await q.query(`ALTER TABLE ${t.sql} ADD COLUMN lane_group text`);
    }

    async down(q: QueryRunner): Promise<void> {
      await q.query(`ALTER TABLE ${t.sql} DROP COLUMN lane_group`);
    }
  };
