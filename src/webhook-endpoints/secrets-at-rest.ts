import { Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { EndpointSecrets } from './endpoint-secrets';
import { WebhookEndpointsRepository } from './webhook-endpoints.repository';

/** Secrets sealed per statement batch. */
const BATCH = 500;

/** A key of IDEMPOTENCY_ENCRYPTION_KEYS removed while it still seals endpoints' secrets: the boot stops. */
export class SecretKeyMissingError extends Error {
  override name = 'SecretKeyMissingError';
}

/**
 * The endpoints' signing secrets under the key ring, checked at every boot:
 *
 * - a key that still seals any secret cannot leave the ring: without it those
 *   endpoints' deliveries would fail for days before anyone saw. The boot
 *   stops, naming the key and how many endpoints need it.
 * - then every secret not sealed under the ring's newest key is sealed under
 *   it: those kept in clear before the ring was turned on, and those of an
 *   older key (so that key can leave the ring at the next deploy); the
 *   secret a rotation replaced (still signing during the overlap) with it.
 *   `npm run webhook-secrets:reseal` does the same without a restart.
 *
 * Every instance may run it: each secret is replaced only if it is still what
 * was read (compare-and-set), so two instances seal each one once.
 */
@Injectable()
export class SecretsAtRest implements OnApplicationBootstrap {
  private readonly logger = new Logger('WebhookSecrets');
  /** How many secrets this process's boot sealed. */
  sealedAtBoot = 0;

  constructor(
    private readonly endpoints: WebhookEndpointsRepository,
    private readonly secrets: EndpointSecrets,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const counts = await this.endpoints.sealedBy();
    const missing = counts.filter((c) => c.key_id !== null && !this.secrets.holds(c.key_id));
    if (missing.length > 0) {
      const named = missing.map((c) => `"${c.key_id}" seals ${c.n} endpoint secret${c.n === 1 ? '' : 's'}`).join(', ');
      throw new SecretKeyMissingError(
        `IDEMPOTENCY_ENCRYPTION_KEYS lacks keys that webhook endpoints still need (${named}): put them back after the newest key; the next boot (or npm run webhook-secrets:reseal) seals those secrets under the newest key, and then they can go`,
      );
    }
    const newest = this.secrets.newestKeyId;
    if (newest === undefined || counts.every((c) => c.key_id === newest)) return;
    this.sealedAtBoot = await this.reseal();
    if (this.sealedAtBoot > 0) this.logger.log(`sealed ${this.sealedAtBoot} webhook endpoint secrets under key "${newest}"`);
  }

  /** Seals under the ring's newest key every secret that is not (in clear, or under an older key); answers how many this call sealed. */
  async reseal(): Promise<number> {
    const newest = this.secrets.newestKeyId;
    if (newest === undefined) throw new Error('IDEMPOTENCY_ENCRYPTION_KEYS is not set: there is no key to seal the secrets under');
    let sealed = 0;
    for (;;) {
      const batch = await this.endpoints.notSealedUnder(newest, BATCH);
      for (const row of batch) {
        const anew = (stored: string) => this.secrets.seal(row.id, this.secrets.unseal(row.id, stored));
        const previous = row.previous_secret === null ? null : anew(row.previous_secret);
        if (await this.endpoints.resealed(row, { secret: anew(row.secret), previous_secret: previous })) sealed++;
      }
      if (batch.length < BATCH) return sealed;
    }
  }
}
