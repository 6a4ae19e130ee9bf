import { createHash } from 'node:crypto';

/**
 * The request fingerprint: the first 128 bits of SHA-256 over method, path
 * (with its params), the sorted query string and the canonical JSON of the body
 * as received (before pipes). 16 bytes are what telling two requests apart
 * needs (a client would have to find a SHA-256 collision of its own requests to
 * replay one for the other), and every stored key carries one. Canonical means object keys sorted recursively and no insignificant
 * whitespace, so the same body with keys in another order is the same request.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    // undefined (no body) and non-finite numbers have no JSON form: name them.
    return value === undefined ? '' : (JSON.stringify(value) ?? 'null');
  }
  if (Array.isArray(value)) {
    return `[${value.map((item) => (item === undefined ? 'null' : canonicalJson(item))).join(',')}]`;
  }
  const entries = Object.keys(value)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(',')}}`;
}

/** The query string with its parameters sorted (by name, then value). */
export function canonicalQuery(search: string): string {
  const params = [...new URLSearchParams(search)];
  params.sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0));
  return new URLSearchParams(params).toString();
}

/** The stored length of a fingerprint (the table checks it). */
export const FINGERPRINT_BYTES = 16;

export function fingerprint(method: string, url: string, body: unknown): Buffer {
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? '' : canonicalQuery(url.slice(q + 1));
  return createHash('sha256')
    .update(method.toUpperCase())
    .update('\n')
    .update(path)
    .update('\n')
    .update(query)
    .update('\n')
    .update(canonicalJson(body))
    .digest()
    .subarray(0, FINGERPRINT_BYTES);
}
