import { createHash } from 'node:crypto';

/*
 * The keys table as docs/security.md ("What is stored") describes it, for tests
 * that find or judge a key's row: its `id` is SHA-256(scope, NUL, key) cut to
 * 128 bits (a uuid), and its `lease` is a time of the database clock in
 * microseconds since the epoch. Written here from that description, not taken
 * from the module's code: a row the module names otherwise is not found.
 */

/** The row id of Idempotency-Key `key` under the principal `scope`. */
export function keyId(scope: string, key: string): string {
  const h = createHash('sha256').update(scope).update('\0').update(key).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** keyId in SQL, over two text expressions, e.g. `keyIdSql('c.id::text', '$1::text')`. */
export function keyIdSql(scope: string, key: string): string {
  return `encode(substring(sha256(convert_to(${scope}, 'UTF8') || '\\x00'::bytea || convert_to(${key}, 'UTF8')) FROM 1 FOR 16), 'hex')::uuid`;
}

/** The database clock in microseconds, as `lease` holds it: tests judge leases on the store's clock, never their own. */
export const NOW_US = `(extract(epoch FROM now()) * 1000000)::int8`;

/** The purge's advisory lock (docs/operations.md): a session holding it makes every purge skip. */
export const PURGE_LOCK_ID = 0x5afe_0002;
