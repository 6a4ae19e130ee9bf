import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A delivery attempt is written before its request is sent and finished
 * with its answer: an attempt whose process died in between keeps its row,
 * unfinished (`finished_at` null), and the client sees it. `error_class`
 * names what went wrong in a word a client can act on (timeout,
 * connection_refused, http_status, ...). Attempts made before this
 * migration count as finished when they were made.
 */
export class WebhookAttempts1797500000000 implements MigrationInterface {
  name = 'WebhookAttempts1797500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE webhook_deliveries ADD COLUMN finished_at timestamptz, ADD COLUMN error_class text');
    await q.query(`UPDATE webhook_deliveries SET finished_at = created_at, error_class = CASE WHEN error IS NULL THEN NULL WHEN status IS NULL THEN 'network' ELSE 'http_status' END`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE webhook_deliveries DROP COLUMN error_class, DROP COLUMN finished_at');
  }
}
