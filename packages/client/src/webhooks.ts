/**
 * Verifying a webhook delivery of the payments API, signed per the Standard
 * Webhooks specification: `webhook-signature` holds `v1,<base64 HMAC-SHA256>`
 * entries (space-separated) of `<webhook-id>.<webhook-timestamp>.<body>`, keyed
 * with the base64-decoded part of the endpoint's `whsec_…` secret.
 *
 * Web Crypto only (`globalThis.crypto.subtle`), so this runs in Node 20+ and
 * browsers. The HMAC is computed once per secret, whatever the header holds,
 * and compared with each entry in constant time; a header of more than
 * MAX_SIGNATURES entries is refused before any HMAC (a sender signs with one
 * secret, or two while it rotates).
 */

/** A delivery's event, as the API sends it. `data` is the resource the event is about. */
export interface WebhookEvent<Data = Record<string, unknown>> {
  /** `evt_…`: the same on every delivery of this event (the `webhook-id` header). Process an event once per id. */
  id: string;
  /** What happened, e.g. `payment.succeeded`. */
  type: string;
  /** When it happened (ISO 8601). Deliveries may arrive out of order: compare it, never assume it. */
  created_at: string;
  data: Data;
}

/** Why a delivery was refused: answer it `400` and apply nothing. */
export type WebhookFailure = 'missing_header' | 'invalid_timestamp' | 'invalid_signature' | 'invalid_payload';

/** A delivery that is not the API's: its headers, timestamp, signature or body do not hold. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';

  constructor(
    readonly reason: WebhookFailure,
    message: string,
  ) {
    super(message);
  }
}

/** The headers of a request: a fetch `Headers`, or Node's and Express's `req.headers`. */
export type WebhookHeaders = { get(name: string): string | null } | Record<string, string | string[] | undefined>;

export interface VerifyWebhookOptions {
  /** How far the `webhook-timestamp` may be from now, either way, in seconds. Default 300. */
  toleranceSeconds?: number;
}

const SECRET_PREFIX = 'whsec_';
/** The most entries a `webhook-signature` may hold: more is not a sender's, and is refused unread. */
export const MAX_SIGNATURES = 10;

/**
 * Checks that a delivery was signed with `secret` (or with one of `secrets`, while
 * a secret is being rotated) and is recent, then parses its body.
 *
 * @param body - the request body exactly as received: the raw bytes, or their
 *   UTF-8 text. A body parsed and serialised again does not verify.
 * @param headers - the request's headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`).
 * @param secret - the endpoint's `whsec_…` secret, or several.
 * @throws {WebhookVerificationError} when a header is missing, the timestamp is
 *   more than `toleranceSeconds` away, no signature matches (or the header holds more
 *   than MAX_SIGNATURES), or the body is not an event, or not the one `webhook-id` names.
 * @throws {TypeError} when a secret is not `whsec_` and base64.
 */
export async function verifyWebhook<Data = Record<string, unknown>>(
  body: string | Uint8Array,
  headers: WebhookHeaders,
  secret: string | readonly string[],
  { toleranceSeconds = 300 }: VerifyWebhookOptions = {},
): Promise<WebhookEvent<Data>> {
  if (!Number.isFinite(toleranceSeconds) || toleranceSeconds < 0) {
    throw new TypeError('verifyWebhook: toleranceSeconds must be a number of seconds, 0 or more');
  }
  const keys = await Promise.all((typeof secret === 'string' ? [secret] : secret).map(importSecret));
  if (keys.length === 0) throw new TypeError('verifyWebhook: no secret given');

  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signature = header(headers, 'webhook-signature');

  if (!/^\d{1,15}$/.test(timestamp)) {
    throw new WebhookVerificationError('invalid_timestamp', `webhook-timestamp is not a unix time in seconds: ${JSON.stringify(timestamp)}`);
  }
  const age = Math.floor(Date.now() / 1000) - Number(timestamp);
  if (Math.abs(age) > toleranceSeconds) {
    throw new WebhookVerificationError(
      'invalid_timestamp',
      `webhook-timestamp is ${Math.abs(age)} s in the ${age > 0 ? 'past' : 'future'}, beyond the tolerance of ${toleranceSeconds} s`,
    );
  }

  const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : body;
  const signed = concat(new TextEncoder().encode(`${id}.${timestamp}.`), bytes);
  if (!(await anySignatureMatches(signature, keys, signed))) {
    throw new WebhookVerificationError('invalid_signature', 'no v1 signature in webhook-signature matches the body with the secret');
  }
  const event = parseEvent<Data>(bytes);
  // The signature covers the header's id and the body apart: a body whose id is another event's is not this delivery.
  if (event.id !== id) throw new WebhookVerificationError('invalid_payload', `the body's id (${event.id}) is not the webhook-id (${id})`);
  return event;
}

async function importSecret(secret: string): Promise<CryptoKey> {
  const raw = typeof secret === 'string' && secret.startsWith(SECRET_PREFIX) ? fromBase64(secret.slice(SECRET_PREFIX.length)) : undefined;
  if (!raw || raw.length === 0) throw new TypeError('verifyWebhook: a secret must be `whsec_` followed by base64');
  return globalThis.crypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
}

function header(headers: WebhookHeaders, name: string): string {
  let value: string | string[] | null | undefined;
  if (typeof headers.get === 'function') {
    value = (headers as { get(name: string): string | null }).get(name);
  } else {
    const record = headers as Record<string, string | string[] | undefined>;
    value = record[name] ?? Object.entries(record).find(([k]) => k.toLowerCase() === name)?.[1];
  }
  if (Array.isArray(value)) value = value.length === 1 ? value[0] : undefined;
  if (typeof value !== 'string' || value.trim() === '') {
    throw new WebhookVerificationError('missing_header', `the ${name} header is missing (or sent more than once)`);
  }
  return value.trim();
}

/** Entries other than `v1,…` (another scheme, e.g. `v1a`) are skipped, as the specification asks. */
async function anySignatureMatches(list: string, keys: CryptoKey[], signed: Uint8Array<ArrayBuffer>): Promise<boolean> {
  const entries = list.split(' ').filter((entry) => entry !== '');
  if (entries.length > MAX_SIGNATURES) {
    throw new WebhookVerificationError('invalid_signature', `webhook-signature holds ${entries.length} entries, more than ${MAX_SIGNATURES}`);
  }
  const macs = entries.flatMap((entry) => {
    const comma = entry.indexOf(',');
    const mac = entry.slice(0, comma) === 'v1' ? fromBase64(entry.slice(comma + 1)) : undefined;
    return mac ? [mac] : [];
  });
  if (macs.length === 0) return false;
  for (const key of keys) {
    const expected = new Uint8Array(await globalThis.crypto.subtle.sign('HMAC', key, signed));
    if (macs.some((mac) => sameBytes(mac, expected))) return true;
  }
  return false;
}

/** Constant time for inputs of one length: every byte is compared, whatever differs first. */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i] ^ b[i];
  return difference === 0;
}

function parseEvent<Data>(bytes: Uint8Array): WebhookEvent<Data> {
  let event: unknown;
  try {
    event = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    throw new WebhookVerificationError('invalid_payload', 'the body is not UTF-8 JSON');
  }
  const e = event as Partial<WebhookEvent<Data>> | null;
  if (typeof e !== 'object' || e === null || Array.isArray(e) || typeof e.id !== 'string' || typeof e.type !== 'string' || typeof e.data !== 'object' || e.data === null) {
    throw new WebhookVerificationError('invalid_payload', 'the body is not an event ({ id, type, created_at, data })');
  }
  return e as WebhookEvent<Data>;
}

function fromBase64(text: string): Uint8Array<ArrayBuffer> | undefined {
  try {
    return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  } catch {
    return undefined;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
