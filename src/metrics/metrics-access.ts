import { createHash, timingSafeEqual } from 'node:crypto';
import { bearerToken } from '../auth/api-key';

/**
 * Metrics name routes, error rates and pool sizes: useful to an attacker, so
 * they are read only with a token. The comparison is constant-time: both sides
 * are hashed to 32 bytes first, so neither the content nor the length leaks.
 */
export function isMetricsTokenValid(authorization: string | undefined, token: string): boolean {
  const presented = bearerToken(authorization);
  if (presented === undefined) return false;
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(digest(presented), digest(token));
}
