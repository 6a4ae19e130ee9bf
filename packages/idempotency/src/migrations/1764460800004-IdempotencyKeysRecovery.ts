import { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyTable } from '../config/idempotency-table';

/**
 * Where a phased operation stands while it is in progress (see PhasedOperation;
 * cleared by its completion), and a partial index that lets the recovery job
 * find abandoned ones without a scan. Written with
 * IF NOT EXISTS: databases of the safe-retries service got both from its
 * PaymentPhases1764460800003 migration, before the module shipped its own.
 */
export const idempotencyKeysRecovery = (t: IdempotencyTable) =>
  class IdempotencyKeysRecovery1764460800004 implements MigrationInterface {
    name = 'IdempotencyKeysRecovery1764460800004';

    async up(q: QueryRunner): Promise<void> {
      await q.query(`ALTER TABLE ${t.sql} ADD COLUMN IF NOT EXISTS recovery jsonb`);
      // The predicate names only `recovery`, never `status`: a column in any index's
      // predicate makes every UPDATE of it non-HOT, and the completion of every key
      // sets `status` (it would then write new entries into every index of the table).
      // The completion clears `recovery` instead.
      await q.query(`CREATE INDEX IF NOT EXISTS ${t.part('recovery_idx')} ON ${t.sql} (lease) WHERE recovery IS NOT NULL`);
    }

    async down(q: QueryRunner): Promise<void> {
      await q.query(`DROP INDEX ${t.qualifiedPart('recovery_idx')}`);
      await q.query(`ALTER TABLE ${t.sql} DROP COLUMN recovery`);
    }
  };
