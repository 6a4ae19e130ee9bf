/**
 * Idempotency keys. A key names one operation, so it is made once, before the
 * first attempt, and reused on every retry. Two ways to make one:
 *
 * - {@link newIdempotencyKey}: a random UUID. Right for a caller that keeps the
 *   key with the operation for as long as it may retry.
 * - {@link keyFor}: derived from the operation's business identity. Right for a
 *   caller that may lose its state (crash, restart, a job re-run) and must still
 *   land on the same key, e.g. `keyFor('refund', paymentId, refundNumber)`.
 *
 * Web Crypto only (`globalThis.crypto`), so this runs in Node 20+ and browsers.
 */

/** Longest key the server accepts. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** A fresh random key (`crypto.randomUUID()`; browsers expose it in secure contexts only). */
export function newIdempotencyKey(): string {
  return globalThis.crypto.randomUUID();
}

/**
 * A deterministic key: the hex SHA-256 of `JSON.stringify([action, ...ids])`.
 *
 * The JSON array keeps the parts apart (`('a', 'b,c')` and `('a', 'b', 'c')`
 * differ). Numbers are written as strings first, so `keyFor('refund', 42)` equals
 * `keyFor('refund', '42')`: an id read back as a string (PostgreSQL bigint, a URL
 * parameter) must not turn a retry into a new operation.
 *
 * @param action - what is being done, e.g. `create-payment`; distinct per operation kind.
 * @param ids - the business identifiers that make this operation unique.
 * @returns 64 lowercase hex characters.
 */
export async function keyFor(action: string, ...ids: (string | number)[]): Promise<string> {
  if (typeof action !== 'string' || action.length === 0) {
    throw new TypeError('keyFor: action must be a non-empty string');
  }
  const parts = ids.map((id, i) => {
    if (typeof id === 'number') {
      // NaN and Infinity all stringify alike: they cannot identify anything.
      if (!Number.isFinite(id)) throw new TypeError(`keyFor: id #${i + 1} is not a finite number`);
      return String(id);
    }
    if (typeof id !== 'string') throw new TypeError(`keyFor: id #${i + 1} must be a string or a number`);
    return id;
  });
  const bytes = new TextEncoder().encode(JSON.stringify([action, ...parts]));
  const digest = await globalThis.crypto.subtle.digest('SHA-256', bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * Why a key would be refused, or `undefined` when it is acceptable. The server
 * takes 1-255 printable ASCII characters; sent bare, a key must also not start
 * with `"` (the server would read it as a quoted string) nor begin or end with
 * whitespace (header values are trimmed, which would change the key).
 */
export function invalidKeyReason(key: string): string | undefined {
  if (key.length === 0) return 'it is empty';
  if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH) return `it is longer than ${MAX_IDEMPOTENCY_KEY_LENGTH} characters`;
  if (!/^[\x20-\x7e]+$/.test(key)) return 'it may contain printable ASCII characters only';
  if (key.startsWith('"')) return 'it starts with a double quote';
  if (key.trim() !== key) return 'it starts or ends with whitespace';
  return undefined;
}
