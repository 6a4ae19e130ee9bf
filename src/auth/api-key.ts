import { createHash, randomBytes } from 'node:crypto';

/**
 * API keys are 256 random bits, shown once and stored only as their SHA-256.
 * A plain (unsalted, fast) hash is right here: the keys are random and long, so
 * there is nothing to brute-force, and the lookup by hash stays one index probe.
 */
export const API_KEY_PREFIX = 'sk_';

export function generateApiKey(): string {
  return API_KEY_PREFIX + randomBytes(32).toString('base64url');
}

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

/** The key from `Authorization: Bearer <key>`, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer\s+(\S{1,512})\s*$/i.exec(header);
  return match?.[1];
}

/**
 * The non-secret part of a key that humans see in `client:keys` and pass to
 * `client:revoke`: its first 12 characters (`sk_` and 9 random ones, 54 of 256
 * bits, for a generated key), but never more than a third of a short key
 * (API_KEYS allows 16 characters).
 */
export function keyPrefix(key: string): string {
  return key.slice(0, Math.min(12, Math.floor(key.length / 3)));
}
