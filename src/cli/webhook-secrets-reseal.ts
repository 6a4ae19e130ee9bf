import { SecretsAtRest } from '../webhook-endpoints/secrets-at-rest';
import { runWithAppContext } from './with-app-context';

/**
 * `npm run webhook-secrets:reseal`: seals every webhook endpoint's signing
 * secret under the newest key of IDEMPOTENCY_ENCRYPTION_KEYS now (those in
 * clear, and those of older keys, which must still be in the ring), so an
 * older key can then be removed. Safe beside running instances: each secret
 * is replaced only if it is still what was read. Every boot does the same.
 */
runWithAppContext('webhook-secrets:reseal', async (context) => {
  const secrets = context.get(SecretsAtRest);
  // The command's own boot has sealed what it found already; anything written since is sealed now.
  const sealed = secrets.sealedAtBoot + (await secrets.reseal());
  console.log(`sealed ${sealed} webhook endpoint secrets under the newest key`);
});
