import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { StoredResponse } from './idempotency.store';

const DEFAULT_CONTENT_TYPE = 'application/json; charset=utf-8';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A key of the ring: its id (stored with each record) and 32 bytes of AES-256 key. */
export interface EncryptionKey {
  id: string;
  key: Buffer;
}

/** A response as the `body` and `headers` columns keep it. */
export interface SealedResponse {
  body: string;
  headers: string | null;
}

/**
 * Stored responses at rest (PostgreSQL store). Without keys, the body is kept
 * as sent and `headers` holds a non-default Content-Type and Location as JSON
 * (null when both are the defaults, to keep rows small).
 *
 * With a key ring (newest first), a response is sealed with AES-256-GCM under
 * the newest key: `body` is base64 of iv ‖ tag ‖ ciphertext of the body's
 * bytes, and `headers` is `{"k": key id, "h": the same of the headers JSON}`.
 * The row's id is the authenticated data, so a sealed response cannot be moved
 * to another key's row. Opening picks the key by the id stored with the record,
 * so records sealed under an older key of the ring, and plain records written
 * before encryption was turned on, still replay byte for byte; a record whose
 * key has left the ring cannot be opened (an error, never a wrong answer).
 */
export class ResponseCipher {
  private readonly keys: ReadonlyMap<string, Buffer>;
  private readonly newest: EncryptionKey | undefined;

  constructor(ring: readonly EncryptionKey[] = []) {
    this.newest = ring[0];
    this.keys = new Map(ring.map((k) => [k.id, k.key]));
  }

  seal(rowId: string, response: StoredResponse): SealedResponse {
    const headers = plainHeaders(response);
    if (!this.newest) return { body: response.body, headers };
    const { id, key } = this.newest;
    const h = headers === null ? null : encrypt(key, rowId, headers);
    return { body: encrypt(key, rowId, response.body), headers: JSON.stringify({ k: id, h }) };
  }

  open(rowId: string, status: number, body: string, headers: string | null): StoredResponse {
    if (!headers) return { status, body, contentType: DEFAULT_CONTENT_TYPE };
    const parsed = JSON.parse(headers) as { ct?: string; loc?: string; k?: string; h?: string | null };
    if (parsed.k === undefined) return { status, body, contentType: parsed.ct ?? DEFAULT_CONTENT_TYPE, location: parsed.loc };
    const key = this.keys.get(parsed.k);
    if (!key) throw new Error(`idempotency: a stored response is sealed with key "${parsed.k}", which is not in the key ring`);
    const plain = this.open(rowId, status, decrypt(key, rowId, body), parsed.h ? decrypt(key, rowId, parsed.h) : null);
    return plain;
  }
}

const PLAIN = new ResponseCipher();

/** A response's `headers` column when it is stored unencrypted. */
export function encodeHeaders(response: StoredResponse): string | null {
  return PLAIN.seal('', response).headers;
}

/** A response stored unencrypted, as the claim reads it. */
export function decodeResponse(status: number, body: string, headers: string | null): StoredResponse {
  return PLAIN.open('', status, body, headers);
}

function plainHeaders(response: StoredResponse): string | null {
  if (response.contentType === DEFAULT_CONTENT_TYPE && !response.location) return null;
  return JSON.stringify({ ct: response.contentType, loc: response.location });
}

function encrypt(key: Buffer, rowId: string, text: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(rowId));
  const sealed = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64');
}

function decrypt(key: Buffer, rowId: string, sealed: string): string {
  const bytes = Buffer.from(sealed, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES));
  decipher.setAAD(Buffer.from(rowId));
  decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
}

/**
 * A key ring from `id:base64` entries, newest first (e.g. the app's
 * IDEMPOTENCY_ENCRYPTION_KEYS): each key 32 bytes, ids unique and made of
 * letters, digits, `-` and `_`. Throws a RangeError naming the bad entry's id.
 */
export function parseKeyRing(entries: readonly string[]): EncryptionKey[] {
  const ring: EncryptionKey[] = [];
  for (const entry of entries) {
    const at = entry.indexOf(':');
    const id = at > 0 ? entry.slice(0, at) : '';
    if (!/^[A-Za-z0-9_-]{1,32}$/.test(id)) throw new RangeError('an encryption key is "id:base64", the id of 1-32 letters, digits, - or _');
    const key = Buffer.from(entry.slice(at + 1), 'base64');
    if (key.length !== 32) throw new RangeError(`the encryption key "${id}" must be 32 bytes (base64 of 32 random bytes), got ${key.length}`);
    if (ring.some((k) => k.id === id)) throw new RangeError(`the encryption key id "${id}" appears twice`);
    ring.push({ id, key });
  }
  return ring;
}
