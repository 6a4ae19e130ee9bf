import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * An operator's decision moves money only on the card network's word about
 * the operation's own object. While the network cannot be asked, a decision
 * waits: `waiting` says why (the last failed try), and is cleared when the
 * hand-over ends. A network event that contradicts a final record (a charge
 * for a payment held failed, a refund the network made for one held failed)
 * opens a hand-over of its own, reason `contradicted`: it belongs to no
 * operation under a key, and ends when an operator acknowledges it.
 */
export class AttentionNetworkWord1797300000000 implements MigrationInterface {
  name = 'AttentionNetworkWord1797300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE operation_attention ADD COLUMN waiting text');
    await q.query('ALTER TABLE operation_attention ALTER COLUMN idempotency_key DROP NOT NULL');
    await q.query('ALTER TABLE operation_attention DROP CONSTRAINT operation_attention_decision_check');
    await q.query(`ALTER TABLE operation_attention ADD CONSTRAINT operation_attention_decision_check CHECK (decision IN ('fail', 'reask', 'acknowledge'))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DELETE FROM operation_attention WHERE reason = 'contradicted'`);
    await q.query('ALTER TABLE operation_attention DROP CONSTRAINT operation_attention_decision_check');
    await q.query(`ALTER TABLE operation_attention ADD CONSTRAINT operation_attention_decision_check CHECK (decision IN ('fail', 'reask'))`);
    await q.query('ALTER TABLE operation_attention ALTER COLUMN idempotency_key SET NOT NULL');
    await q.query('ALTER TABLE operation_attention DROP COLUMN waiting');
  }
}
