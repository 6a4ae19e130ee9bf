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

/** A stored response that cannot be opened: edited, moved from another row, in clear under a key ring, or its key gone. */
export class SealedResponseError extends Error {
  override name = 'SealedResponseError';
}

/**
 * Stored responses at rest (PostgreSQL store). Without keys, the body is kept
 * as sent and `headers` holds a non-default Content-Type and Location as JSON
 * (null when both are the defaults, to keep rows small).
 *
 * With a key ring (newest first), a response is sealed with AES-256-GCM under
 * the newest key: `body` is base64 of iv ‖ tag ‖ ciphertext of the body's
 * bytes, and `headers` is `{"v":2,"k": key id,"h": the same of the headers
 * JSON}`. The authenticated data binds everything a replay answers to the
 * ciphertext: the row's id, the status column, the key id and the version
 * (the marker that the row is sealed), and for the body also the sealed
 * headers. So a row cannot be moved to another key, a stored 402 cannot be
 * edited into a 201, headers cannot be swapped in or dropped, and a sealed
 * row cannot be turned into a plain one: with a key ring, a row in clear is
 * refused. Each refusal is a SealedResponseError naming the idempotency key
 * (and the encryption key): an error, never a wrong answer.
 *
 * Opening picks the key by the id stored with the record, so records sealed
 * under an older key of the ring still replay byte for byte, and so do rows
 * sealed before the status was bound (no `v`: bound to their row alone, until
 * their retention ends). Rows stored in clear before encryption was turned on
 * are refused, as an edited row would be: their retries answer an error.
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
    const bound = boundData(rowId, response.status, id);
    const h = headers === null ? null : encrypt(key, bound, headers);
    return { body: encrypt(key, `${bound}\0${h ?? ''}`, response.body), headers: JSON.stringify({ v: SEALED_VERSION, k: id, h }) };
  }

  /** The response of the row `rowId` (the idempotency key `key`, named in errors); SealedResponseError when it cannot be believed. */
  open(rowId: string, status: number, body: string, headers: string | null, key = ''): StoredResponse {
    const name = key ? `the stored response of idempotency key "${key}"` : 'a stored response';
    let parsed: { ct?: string; loc?: string; v?: number; k?: string; h?: string | null };
    try {
      parsed = headers ? (JSON.parse(headers) as typeof parsed) : {};
    } catch {
      throw new SealedResponseError(`idempotency: ${name} has a headers column that is not the module's JSON: refused`);
    }
    if (parsed.k === undefined) {
      if (this.newest) throw new SealedResponseError(`idempotency: ${name} is stored in clear, and stored responses are sealed (encryption key "${this.newest.id}"): refused`);
      return inClear(status, body, parsed);
    }
    const secret = this.keys.get(parsed.k);
    if (!secret) throw new SealedResponseError(`idempotency: ${name} is sealed with encryption key "${parsed.k}", which is not in the key ring`);
    try {
      if (parsed.v === SEALED_VERSION) {
        const bound = boundData(rowId, status, parsed.k);
        const h = parsed.h ? decrypt(secret, bound, parsed.h) : null;
        return inClear(status, decrypt(secret, `${bound}\0${parsed.h ?? ''}`, body), h ? (JSON.parse(h) as typeof parsed) : {});
      }
      if (parsed.v !== undefined) throw new Error(`unknown version ${String(parsed.v)}`);
      // Sealed before the status and headers were bound: the row's id alone.
      const h = parsed.h ? decrypt(secret, rowId, parsed.h) : null;
      return inClear(status, decrypt(secret, rowId, body), h ? (JSON.parse(h) as typeof parsed) : {});
    } catch (error) {
      throw new SealedResponseError(
        `idempotency: ${name} does not open with encryption key "${parsed.k}": its status, headers or body were changed, or it was moved from another row`,
        { cause: error },
      );
    }
  }
}

/** The version of the sealed format whose authenticated data binds the status, the headers and the marker. */
const SEALED_VERSION = 2;

/** The authenticated data of a sealed response: the marker (version), the row, the status, the key. */
function boundData(rowId: string, status: number, keyId: string): string {
  return `sealed-v${SEALED_VERSION}\0${rowId}\0${status}\0${keyId}`;
}

function inClear(status: number, body: string, headers: { ct?: string; loc?: string }): StoredResponse {
  return { status, body, contentType: headers.ct ?? DEFAULT_CONTENT_TYPE, location: headers.loc };
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

function encrypt(key: Buffer, aad: string, text: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad));
  const sealed = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64');
}

function decrypt(key: Buffer, aad: string, sealed: string): string {
  const bytes = Buffer.from(sealed, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES));
  decipher.setAAD(Buffer.from(aad));
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
