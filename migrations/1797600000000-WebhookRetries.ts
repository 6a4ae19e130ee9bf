import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Retries on a published schedule, and endpoints that fail paused, not
 * hammered (src/events/webhook-schedule.ts). `webhook_deliveries.retry_at`:
 * when a failed attempt's message may be tried again ('infinity': its schedule
 * is over); the message's attempts are found by `message_id`. On
 * `webhook_endpoints`: `failures` in a row and `failing_since` (the first of
 * them), `next_probe_at` (set: the endpoint is paused, one probe delivery goes
 * then), `disabled_at` and `disabled_reason` (the client reads it; POST
 * /webhook-endpoints/{id}/enable clears them).
 */
export class WebhookRetries1797600000000 implements MigrationInterface {
  name = 'WebhookRetries1797600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE webhook_deliveries ADD COLUMN retry_at timestamptz');
    await q.query('CREATE INDEX webhook_deliveries_message_idx ON webhook_deliveries (client_id, message_id, created_at)');
    await q.query(`
      ALTER TABLE webhook_endpoints
        ADD COLUMN failures int NOT NULL DEFAULT 0,
        ADD COLUMN failing_since timestamptz,
        ADD COLUMN next_probe_at timestamptz,
        ADD COLUMN disabled_at timestamptz,
        ADD COLUMN disabled_reason text,
        ADD CONSTRAINT webhook_endpoints_disabled_check CHECK ((disabled_at IS NULL) = (disabled_reason IS NULL))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE webhook_endpoints
        DROP CONSTRAINT webhook_endpoints_disabled_check,
        DROP COLUMN disabled_reason, DROP COLUMN disabled_at, DROP COLUMN next_probe_at, DROP COLUMN failing_since, DROP COLUMN failures`);
    await q.query('DROP INDEX webhook_deliveries_message_idx');
    await q.query('ALTER TABLE webhook_deliveries DROP COLUMN retry_at');
  }
}
