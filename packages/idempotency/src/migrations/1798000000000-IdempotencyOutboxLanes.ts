import { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyTable } from '../config/idempotency-table';

/**
 * The outbox's lanes (see OutboxRelay): `lane` names the destination a
 * message shares with others (NULL: none), so that one relay holds at most a
 * few deliveries of a lane at once and claims across lanes in turn. A column
 * without a default: adding it rewrites no row.
 */
export const idempotencyOutboxLanes = (t: IdempotencyTable) =>
  class IdempotencyOutboxLanes1798000000000 implements MigrationInterface {
    name = 'IdempotencyOutboxLanes1798000000000';

    async up(q: QueryRunner): Promise<void> {
      await q.query(`ALTER TABLE ${t.sql} ADD COLUMN lane text`);
    }

    async down(q: QueryRunner): Promise<void> {
      await q.query(`ALTER TABLE ${t.sql} DROP COLUMN lane`);
    }
  };
