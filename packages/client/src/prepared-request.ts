/**
 * A request is fixed before its first attempt and identical on every attempt:
 * the retry loop receives it whole and has no way to make a key or serialise
 * a body again, so a retry can only ever be a replay of the same request.
 */
import type { ClientSettings } from './client-options';
import { invalidKeyReason } from './keys';

/** One request, fixed before the first attempt and identical on every attempt. */
export interface PreparedRequest {
  readonly method: 'GET' | 'POST';
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string | undefined;
  readonly idempotencyKey: string | undefined;
}

/** A POST of `body` as JSON under `key`: the key checked and the body serialised exactly once, both frozen. */
export function preparePost(settings: ClientSettings, path: string, body: unknown, key: string): PreparedRequest {
  const reason = invalidKeyReason(key);
  if (reason) throw new TypeError(`Invalid idempotency key: ${reason}`);
  const serialized = JSON.stringify(body);
  if (serialized === undefined) throw new TypeError('The request body cannot be serialised to JSON');
  return Object.freeze({
    method: 'POST',
    url: urlFor(settings, path),
    headers: Object.freeze({
      Authorization: `Bearer ${settings.apiKey}`,
      Accept: 'application/json',
      'Content-Type': 'application/json',
      'Idempotency-Key': key,
    }),
    body: serialized,
    idempotencyKey: key,
  });
}

/** A GET of `path` (safe to repeat, so it carries no key). */
export function prepareGet(settings: ClientSettings, path: string): PreparedRequest {
  return Object.freeze({
    method: 'GET',
    url: urlFor(settings, path),
    headers: Object.freeze({ Authorization: `Bearer ${settings.apiKey}`, Accept: 'application/json' }),
    body: undefined,
    idempotencyKey: undefined,
  });
}

/**
 * Appends `path` to the base URL. Not `new URL(path, base)`, which would drop
 * the base's own path (`/v1`) for an absolute path.
 */
function urlFor(settings: ClientSettings, path: string): string {
  if (/^[a-z][a-z\d+.-]*:/i.test(path) || path.startsWith('//')) {
    throw new TypeError(`Expected a path relative to baseUrl, got "${path}"`);
  }
  return `${settings.baseUrl}/${path.replace(/^\/+/, '')}`;
}
