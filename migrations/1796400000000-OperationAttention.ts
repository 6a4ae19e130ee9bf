import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Operations handed to a person. A payment or refund the card network keeps
 * refusing, or that stays unknown past its bound, moves to `requires_attention`:
 * a payment keeps its order reserved (it may have charged), a refund keeps its
 * amount reserved. `operation_attention` holds each hand-over with its
 * evidence, the operator's decision (who, when, why) and how it ended: the
 * open rows are what `npm run attention -- list` shows, all rows the audit.
 * The settlement job walks pending refunds, and succeeded ones that may still
 * fail, in (created_at, client_id, id) order from a cursor: one index each.
 */
export class OperationAttention1796400000000 implements MigrationInterface {
  name = 'OperationAttention1796400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE payments DROP CONSTRAINT payments_status_check');
    await q.query(`ALTER TABLE payments ADD CONSTRAINT payments_status_check CHECK (status IN ('processing', 'succeeded', 'failed', 'requires_attention'))`);
    await q.query('DROP INDEX payments_one_active_per_order');
    await q.query(
      `CREATE UNIQUE INDEX payments_one_active_per_order ON payments (client_id, order_id)
        WHERE status IN ('processing', 'succeeded', 'requires_attention') AND order_id IS NOT NULL`,
    );
    await q.query('ALTER TABLE refunds DROP CONSTRAINT refunds_status_check');
    await q.query(`ALTER TABLE refunds ADD CONSTRAINT refunds_status_check CHECK (status IN ('processing', 'pending', 'succeeded', 'failed', 'requires_attention'))`);
    await q.query('DROP INDEX refunds_pending_idx');
    await q.query(`CREATE INDEX refunds_pending_walk_idx ON refunds (created_at, client_id, id) WHERE status = 'pending'`);
    await q.query(`CREATE INDEX refunds_succeeded_walk_idx ON refunds (created_at, client_id, id) WHERE status = 'succeeded'`);
    await q.query(`
      CREATE TABLE operation_attention (
        client_id uuid NOT NULL,
        id uuid NOT NULL DEFAULT gen_random_uuid(),
        operation text NOT NULL,
        record_id uuid NOT NULL,
        idempotency_key text NOT NULL,
        reason text NOT NULL,
        evidence text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        decision text,
        decision_reason text,
        decided_by text,
        decided_at timestamptz,
        resolution text,
        resolved_at timestamptz,
        CONSTRAINT operation_attention_pkey PRIMARY KEY (client_id, id),
        CONSTRAINT operation_attention_client_fkey FOREIGN KEY (client_id) REFERENCES clients (id),
        CONSTRAINT operation_attention_operation_check CHECK (operation IN ('payment', 'refund')),
        CONSTRAINT operation_attention_decision_check CHECK (decision IN ('fail', 'reask')),
        CONSTRAINT operation_attention_decided_check CHECK ((decision IS NULL) = (decided_at IS NULL)),
        CONSTRAINT operation_attention_resolved_check CHECK ((resolution IS NULL) = (resolved_at IS NULL))
      )`);
    await q.query(
      `CREATE UNIQUE INDEX operation_attention_one_open ON operation_attention (client_id, operation, record_id) WHERE resolved_at IS NULL`,
    );
    await q.query(`CREATE INDEX operation_attention_open_idx ON operation_attention (created_at, client_id, id) WHERE resolved_at IS NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE operation_attention');
    // Back to processing: the operation is resumed as an unknown outcome, as before this migration.
    await q.query(`UPDATE refunds SET status = 'processing' WHERE status = 'requires_attention'`);
    await q.query(`UPDATE payments SET status = 'processing' WHERE status = 'requires_attention'`);
    await q.query('DROP INDEX refunds_succeeded_walk_idx');
    await q.query('DROP INDEX refunds_pending_walk_idx');
    await q.query(`CREATE INDEX refunds_pending_idx ON refunds (created_at) WHERE status = 'pending'`);
    await q.query('ALTER TABLE refunds DROP CONSTRAINT refunds_status_check');
    await q.query(`ALTER TABLE refunds ADD CONSTRAINT refunds_status_check CHECK (status IN ('processing', 'pending', 'succeeded', 'failed'))`);
    await q.query('DROP INDEX payments_one_active_per_order');
    await q.query(
      `CREATE UNIQUE INDEX payments_one_active_per_order ON payments (client_id, order_id) WHERE status IN ('processing', 'succeeded') AND order_id IS NOT NULL`,
    );
    await q.query('ALTER TABLE payments DROP CONSTRAINT payments_status_check');
    await q.query(`ALTER TABLE payments ADD CONSTRAINT payments_status_check CHECK (status IN ('processing', 'succeeded', 'failed'))`);
  }
}
