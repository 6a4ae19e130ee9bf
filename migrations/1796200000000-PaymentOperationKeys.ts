import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The Idempotency-Key under which a payment or refund was asked for. A webhook
 * of the card network names the payment (its metadata); with this key it can
 * take the client's in-progress operation over and store the final response,
 * so the client's late retry replays it.
 */
export class PaymentOperationKeys1796200000000 implements MigrationInterface {
  name = 'PaymentOperationKeys1796200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE payments ADD COLUMN idempotency_key text');
    await q.query('ALTER TABLE refunds ADD COLUMN idempotency_key text');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE refunds DROP COLUMN idempotency_key');
    await q.query('ALTER TABLE payments DROP COLUMN idempotency_key');
  }
}
