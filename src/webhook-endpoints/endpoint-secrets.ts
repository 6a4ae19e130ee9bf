import { Inject, Injectable } from '@nestjs/common';
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { parseKeyRing } from 'safe-retries';
import type { AppConfig } from '../config/config';
import { APP_CONFIG } from '../config/config.module';

const IV_BYTES = 12;
const TAG_BYTES = 16;
const SEALED = 'sealed:v1:';

/**
 * How long a rotated secret keeps signing beside the new one (on the
 * database's clock, from the rotation): a receiver that switched and one that
 * has not both verify every delivery meanwhile. The client may end it sooner.
 */
export const ROTATION_OVERLAP = '24 hours';

/**
 * Endpoints' signing secrets at rest. A secret signs (HMAC), so it cannot be
 * hashed like an API key: with IDEMPOTENCY_ENCRYPTION_KEYS set, it is sealed
 * as stored responses are, AES-256-GCM under the ring's newest key
 * (`sealed:v1:<key id>:<base64 of iv ‖ tag ‖ ciphertext>`), the endpoint's id
 * and the key id bound as authenticated data, so a sealed secret cannot be
 * moved to another endpoint. Older keys of the ring still open theirs. With no
 * ring (outside production only), secrets are stored in clear; with a ring, a
 * secret in clear is refused (SecretsAtRest seals those at boot).
 */
@Injectable()
export class EndpointSecrets {
  private readonly ring: ReturnType<typeof parseKeyRing>;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.ring = parseKeyRing(config.idempotency.postgres.encryptionKeys);
  }

  /** A new signing secret in the Standard Webhooks format: `whsec_` and base64 of 32 random bytes. */
  static generate(): string {
    return `whsec_${randomBytes(32).toString('base64')}`;
  }

  seal(endpointId: string, secret: string): string {
    const newest = this.ring[0];
    if (!newest) return secret;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', newest.key, iv);
    cipher.setAAD(aad(endpointId, newest.id));
    const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return `${SEALED}${newest.id}:${Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64')}`;
  }

  /** The id of the ring's newest key (what `seal` uses), or undefined with no ring. */
  get newestKeyId(): string | undefined {
    return this.ring[0]?.id;
  }

  /** Whether the ring holds the key `keyId`. */
  holds(keyId: string): boolean {
    return this.ring.some((k) => k.id === keyId);
  }

  open(endpointId: string, stored: string): string {
    if (!stored.startsWith(SEALED) && this.ring.length) {
      throw new Error(`the secret of webhook endpoint ${endpointId} is stored in clear, and secrets are sealed: refused`);
    }
    return this.unseal(endpointId, stored);
  }

  /** The secret as stored: in clear, or sealed under any key of the ring (for sealing it anew). */
  unseal(endpointId: string, stored: string): string {
    if (!stored.startsWith(SEALED)) return stored;
    const rest = stored.slice(SEALED.length);
    const at = rest.indexOf(':');
    const keyId = rest.slice(0, at);
    const key = this.ring.find((k) => k.id === keyId);
    if (!key) throw new Error(`the secret of webhook endpoint ${endpointId} is sealed with encryption key "${keyId}", which is not in the key ring`);
    const bytes = Buffer.from(rest.slice(at + 1), 'base64');
    const decipher = createDecipheriv('aes-256-gcm', key.key, bytes.subarray(0, IV_BYTES));
    decipher.setAAD(aad(endpointId, keyId));
    decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  }
}

function aad(endpointId: string, keyId: string): Buffer {
  return Buffer.from(`webhook-endpoint-secret\0${endpointId}\0${keyId}`);
}
