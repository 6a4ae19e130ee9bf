import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Refunds take the card network's states: `pending` (the network has the
 * refund, not yet settled) and `failed` (the network gave up on it; its amount
 * is back on the payment), with the network's `failure_reason`. The partial
 * index lets the settlement job find the pending ones without a scan.
 */
export class RefundStates1796300000000 implements MigrationInterface {
  name = 'RefundStates1796300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE refunds DROP CONSTRAINT refunds_status_check');
    await q.query(`ALTER TABLE refunds ADD CONSTRAINT refunds_status_check CHECK (status IN ('processing', 'pending', 'succeeded', 'failed'))`);
    await q.query('ALTER TABLE refunds ADD COLUMN failure_reason text');
    await q.query(`CREATE INDEX refunds_pending_idx ON refunds (created_at) WHERE status = 'pending'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX refunds_pending_idx');
    await q.query('ALTER TABLE refunds DROP COLUMN failure_reason');
    // A failed refund's amount is already back on its payment; a pending one is the network's to settle.
    await q.query(`DELETE FROM refunds WHERE status = 'failed'`);
    await q.query(`UPDATE refunds SET status = 'processing' WHERE status = 'pending'`);
    await q.query('ALTER TABLE refunds DROP CONSTRAINT refunds_status_check');
    await q.query(`ALTER TABLE refunds ADD CONSTRAINT refunds_status_check CHECK (status IN ('processing', 'succeeded'))`);
  }
}
