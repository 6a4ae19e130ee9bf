/**
 * The Idempotency-Key header: a bare value (as Stripe's clients send it) or an
 * RFC 8941 sf-string (`"..."` with `\"` and `\\` escapes, as the IETF draft
 * specifies). Both normalise to one key, so a client that switches styles never
 * gets two executions. A key is 1-255 printable ASCII characters (0x20-0x7E).
 */
export const MAX_KEY_LENGTH = 255;

export type KeyParseResult = { ok: true; key: string } | { ok: false; reason: string };

const isPrintable = (code: number) => code >= 0x20 && code <= 0x7e;

function parseSfString(value: string): KeyParseResult {
  let key = '';
  for (let i = 1; i < value.length; i++) {
    const ch = value[i];
    if (ch === '\\') {
      const next = value[i + 1];
      if (next !== '"' && next !== '\\') return { ok: false, reason: 'only \\" and \\\\ escapes are allowed in a quoted key' };
      key += next;
      i++;
    } else if (ch === '"') {
      if (i !== value.length - 1) return { ok: false, reason: 'unexpected characters after the closing quote' };
      return validate(key);
    } else {
      key += ch;
    }
  }
  return { ok: false, reason: 'the quoted key has no closing quote' };
}

function validate(key: string): KeyParseResult {
  if (key.length === 0) return { ok: false, reason: 'the key is empty' };
  if (key.length > MAX_KEY_LENGTH) return { ok: false, reason: `the key is longer than ${MAX_KEY_LENGTH} characters` };
  for (let i = 0; i < key.length; i++) {
    if (!isPrintable(key.charCodeAt(i))) return { ok: false, reason: 'the key may contain printable ASCII characters only' };
  }
  return { ok: true, key };
}

/** Parses a header value (already present) into the normalised key. */
export function parseIdempotencyKey(raw: string): KeyParseResult {
  const value = raw.replace(/^[ \t]+|[ \t]+$/g, '');
  return value.startsWith('"') ? parseSfString(value) : validate(value);
}

