import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Payments and refunds in atomic phases (see docs/idempotency.md, "Phases"):
 * - a payment is 'processing' between its Start and Finish phases; it keeps the
 *   card source it charges so any attempt (or the recovery job) can resume it;
 *   one processing-or-succeeded payment per order reserves the order;
 * - a refund is 'processing' until the card network has made it, and records
 *   the network's refund id.
 * It also used to add idempotency_keys.recovery and its index; the idempotency
 * module ships that change as its own migration (IdempotencyKeysRecovery1764460800004,
 * IF NOT EXISTS): databases that ran this one have both, fresh ones get them there.
 */
export class PaymentPhases1764460800003 implements MigrationInterface {
  name = 'PaymentPhases1764460800003';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE payments DROP CONSTRAINT payments_status_check');
    await q.query(`ALTER TABLE payments ADD CONSTRAINT payments_status_check CHECK (status IN ('processing', 'succeeded', 'failed'))`);
    await q.query('ALTER TABLE payments ADD COLUMN payment_method text');
    await q.query('DROP INDEX payments_one_success_per_order');
    await q.query(
      `CREATE UNIQUE INDEX payments_one_active_per_order ON payments (client_id, order_id) WHERE status IN ('processing', 'succeeded') AND order_id IS NOT NULL`,
    );
    await q.query(`ALTER TABLE refunds ADD COLUMN status text NOT NULL DEFAULT 'succeeded'`);
    await q.query(`ALTER TABLE refunds ADD CONSTRAINT refunds_status_check CHECK (status IN ('processing', 'succeeded'))`);
    await q.query('ALTER TABLE refunds ADD COLUMN network_refund_id text');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE refunds DROP COLUMN network_refund_id');
    await q.query('ALTER TABLE refunds DROP CONSTRAINT refunds_status_check');
    await q.query('ALTER TABLE refunds DROP COLUMN status');
    await q.query('DROP INDEX payments_one_active_per_order');
    await q.query(`DELETE FROM payments WHERE status = 'processing'`);
    await q.query(
      `CREATE UNIQUE INDEX payments_one_success_per_order ON payments (client_id, order_id) WHERE status = 'succeeded' AND order_id IS NOT NULL`,
    );
    await q.query('ALTER TABLE payments DROP COLUMN payment_method');
    await q.query('ALTER TABLE payments DROP CONSTRAINT payments_status_check');
    await q.query(`ALTER TABLE payments ADD CONSTRAINT payments_status_check CHECK (status IN ('succeeded', 'failed'))`);
  }
}
