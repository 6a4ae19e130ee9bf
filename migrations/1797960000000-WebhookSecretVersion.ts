import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Which of an endpoint's secrets is in force: 1 at registration, one more at
 * each rotation that makes a new secret. The answers that showed a secret
 * (registration, rotation) are kept under their Idempotency-Key without it,
 * with this number in its place; a replay shows the secret again from the
 * sealed row only while the number still matches
 * (src/webhook-endpoints/secret-answers.ts).
 */
export class WebhookSecretVersion1797960000000 implements MigrationInterface {
  name = 'WebhookSecretVersion1797960000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE webhook_endpoints ADD COLUMN secret_version integer NOT NULL DEFAULT 1');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE webhook_endpoints DROP COLUMN secret_version');
  }
}
