import { createHash } from 'node:crypto';

/**
 * A key's row id: the first 128 bits of SHA-256(scope, NUL, key), as a uuid.
 *
 * The table stores neither the scope nor the key: the id is the whole primary
 * key (16 bytes in the row and in each index entry, where the two texts took
 * 70 bytes and more), so a key costs the same whatever its length or its
 * principal's. A scope never contains NUL (checkScope refuses it; PostgreSQL
 * text cannot hold one) and a key is printable ASCII, so the input is
 * unambiguous. Two distinct (scope, key) pairs share an id with probability
 * about n²/2¹²⁹ for n stored keys: 10¹² keys give 1.5 × 10⁻¹⁵. It is
 * derived once per request, and the stores are given it with the key (ScopedKey).
 *
 * keyIdSql is the same function in SQL, for operators and migrations: a unit
 * test keeps the two identical.
 */
export function keyId(scope: string, key: string): string {
  const h = createHash('sha256').update(scope).update('\0').update(key).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** keyId as a SQL expression over two text expressions, e.g. `keyIdSql('$1', '$2')`. */
export function keyIdSql(scope: string, key: string): string {
  return `encode(substring(sha256(convert_to(${scope}, 'UTF8') || '\\x00'::bytea || convert_to(${key}, 'UTF8')) FROM 1 FOR 16), 'hex')::uuid`;
}
