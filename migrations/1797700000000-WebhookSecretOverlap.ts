import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A rotated endpoint's secret keeps signing beside the new one for a while
 * (src/webhook-endpoints/endpoint-secrets.ts, ROTATION_OVERLAP), so a
 * receiver can switch without refusing a delivery. `previous_secret`: the
 * secret the last rotation replaced, sealed as `secret` is; `rotated_at`:
 * that rotation's time on the database's clock. Both are cleared when the
 * client ends the overlap.
 */
export class WebhookSecretOverlap1797700000000 implements MigrationInterface {
  name = 'WebhookSecretOverlap1797700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE webhook_endpoints
        ADD COLUMN previous_secret text,
        ADD COLUMN rotated_at timestamptz,
        ADD CONSTRAINT webhook_endpoints_previous_secret_check CHECK ((previous_secret IS NULL) = (rotated_at IS NULL))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE webhook_endpoints
        DROP CONSTRAINT webhook_endpoints_previous_secret_check,
        DROP COLUMN rotated_at, DROP COLUMN previous_secret`);
  }
}
