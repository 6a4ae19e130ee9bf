import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The refund settlement job's one cursor for the whole fleet: where each of
 * its two walks (pending refunds, recent succeeded ones) stands, as the
 * (created_at, client_id, id) of the last refund asked about (null: from the
 * oldest), and the lease of the instance that walks (`holder`, until
 * `lease_until` on the database's clock). One row, whatever the number of
 * instances: they share the walk instead of each repeating it. It spans every
 * client, so it carries no client_id: it stays on the coordinator when
 * sharded (docs/scale-out.md).
 */
export class RefundSettlementCursor1797400000000 implements MigrationInterface {
  name = 'RefundSettlementCursor1797400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE refund_settlement_cursor (
        id boolean NOT NULL DEFAULT true,
        holder uuid,
        lease_until timestamptz,
        pending_at timestamptz,
        pending_client_id uuid,
        pending_id uuid,
        succeeded_at timestamptz,
        succeeded_client_id uuid,
        succeeded_id uuid,
        CONSTRAINT refund_settlement_cursor_pkey PRIMARY KEY (id),
        CONSTRAINT refund_settlement_cursor_one_row CHECK (id),
        CONSTRAINT refund_settlement_cursor_pending_check CHECK (num_nulls(pending_at, pending_client_id, pending_id) IN (0, 3)),
        CONSTRAINT refund_settlement_cursor_succeeded_check CHECK (num_nulls(succeeded_at, succeeded_client_id, succeeded_id) IN (0, 3))
      )`);
    await q.query('INSERT INTO refund_settlement_cursor (id) VALUES (true)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE refund_settlement_cursor');
  }
}
