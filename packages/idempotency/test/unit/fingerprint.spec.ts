import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import { Fingerprints, StoredRequest, definedFingerprint, fingerprints, forSamples } from '../support/fingerprints';
import { jsonBody, reorderKeys, shuffler } from '../support/json-values';

/**
 * The fingerprint the module stores with each key (the keys table's
 * `fingerprint`), for requests to routes whose `fingerprint(req)` option gives
 * the body: through one app, many requests at once.
 */
let f: Fingerprints;
beforeAll(async () => (f = await fingerprints()));
afterAll(() => f?.close());

/** The stored fingerprint of one request. */
const fingerprint = async (method: StoredRequest['method'], url: string, value: unknown) => (await f.of([{ method, url, value }]))[0];
/** The query part of the stored fingerprint, read as the definition says it is made: the query that gives the same fingerprint. */
const withQuery = (search: string) => fingerprint('POST', `/x?${search}`, {});
const canonicalQueryIs = (query: string) => definedFingerprint('POST', '/x', query, '{}');

describe('the query in the fingerprint', () => {
  it.each([
    ['a=1&b=2', 'a=1&b=2'],
    ['b=2&a=1', 'a=1&b=2'],
    ['?b=2&a=1', 'a=1&b=2'],
    ['', ''],
    ['a=2&a=1', 'a=1&a=2'],
    ['b=1&a=2&a=1', 'a=1&a=2&b=1'],
    ['q=a+b', 'q=a+b'],
    ['q=a%20b', 'q=a+b'],
    ['flag', 'flag='],
    ['x=%C3%A9', 'x=%C3%A9'],
  ])('canonicalises %j to %j', async (input, expected) => {
    expect(await withQuery(input)).toBe(canonicalQueryIs(expected));
  });

  it('is independent of parameter order', async () => {
    const params = fc.array(fc.tuple(fc.string({ maxLength: 6 }), fc.string({ maxLength: 6 })), { maxLength: 10 });
    await forSamples(
      f,
      fc.tuple(params, fc.integer()),
      ([pairs, seed]) => {
        const shuffled = shuffler(seed)(pairs.map((_, i) => String(i))).map((i) => pairs[Number(i)]);
        return [new URLSearchParams(pairs).toString(), new URLSearchParams(shuffled).toString()].map((q) => ({ url: `/x?${q}`, value: {} }));
      },
      (_sample, [a, b]) => expect(b).toBe(a),
    );
  });

  it('keeps every parameter (same multiset of pairs)', async () => {
    const params = fc.array(fc.tuple(fc.string({ maxLength: 6 }), fc.string({ maxLength: 6 })), { maxLength: 10 });
    // The pairs sorted by name then value, as the definition says: the fingerprint of that query, and no other.
    const sorted = (pairs: [string, string][]) =>
      new URLSearchParams([...pairs].sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0))).toString();
    await forSamples(
      f,
      params,
      (pairs) => [{ url: `/x?${new URLSearchParams(pairs).toString()}`, value: {} }],
      (pairs, [stored]) => expect(stored).toBe(canonicalQueryIs(sorted(pairs))),
    );
  });
});

describe('fingerprint', () => {
  const base = () => fingerprint('POST', '/orders?a=1&b=2', { amount: 100, currency: 'EUR' });

  it('is a 16-byte Buffer', async () => {
    const fp = Buffer.from(await base(), 'hex');
    expect(Buffer.isBuffer(fp)).toBe(true);
    expect(fp).toHaveLength(16);
  });

  it('is the first 16 bytes of the SHA-256 of method, path, sorted query and canonical body joined by newlines', async () => {
    expect(await fingerprint('post', '/orders?b=2&a=1', { currency: 'EUR', amount: 100 })).toEqual(
      definedFingerprint('POST', '/orders', 'a=1&b=2', '{"amount":100,"currency":"EUR"}'),
    );
    expect(await fingerprint('GET', '/orders', undefined)).toEqual(definedFingerprint('GET', '/orders', '', ''));
  });

  it('is stable across processes and releases (stored fingerprints must still match after a restart or deploy)', async () => {
    // A pinned value computed once: any salt, clock, per-process state or change of encoding breaks it.
    // It is the first half of the 32 bytes earlier releases stored for the same request
    // (e76e...5c13): the IdempotencyKeysHashed migration truncates stored fingerprints to match.
    expect(await base()).toBe('e76e8678bbb167c3cd40742689d169d6');
  });

  it('ignores the case of the method', async () => {
    expect(await fingerprint('post', '/orders?a=1&b=2', { amount: 100, currency: 'EUR' })).toEqual(await base());
  });

  it('depends on the method', async () => {
    expect(await fingerprint('PUT', '/orders?a=1&b=2', { amount: 100, currency: 'EUR' })).not.toEqual(await base());
  });

  it('depends on the path', async () => {
    expect(await fingerprint('POST', '/orders/1?a=1&b=2', { amount: 100, currency: 'EUR' })).not.toEqual(await base());
    expect(await fingerprint('POST', '/order?a=1&b=2', { amount: 100, currency: 'EUR' })).not.toEqual(await base());
  });

  it('treats ?a=1&b=2 and ?b=2&a=1 as the same query', async () => {
    expect(await fingerprint('POST', '/orders?b=2&a=1', { amount: 100, currency: 'EUR' })).toEqual(await base());
  });

  it('depends on the query values and names', async () => {
    expect(await fingerprint('POST', '/orders?a=1&b=3', { amount: 100, currency: 'EUR' })).not.toEqual(await base());
    expect(await fingerprint('POST', '/orders?a=1&c=2', { amount: 100, currency: 'EUR' })).not.toEqual(await base());
    expect(await fingerprint('POST', '/orders?a=1', { amount: 100, currency: 'EUR' })).not.toEqual(await base());
    expect(await fingerprint('POST', '/orders', { amount: 100, currency: 'EUR' })).not.toEqual(await base());
  });

  it('treats an empty query ("?") like no query', async () => {
    expect(await fingerprint('GET', '/orders?', undefined)).toEqual(await fingerprint('GET', '/orders', undefined));
  });

  it('depends on the body', async () => {
    expect(await fingerprint('POST', '/orders?a=1&b=2', { amount: 101, currency: 'EUR' })).not.toEqual(await base());
    expect(await fingerprint('POST', '/orders?a=1&b=2', { amount: '100', currency: 'EUR' })).not.toEqual(await base());
    expect(await fingerprint('POST', '/orders?a=1&b=2', { amount: 100 })).not.toEqual(await base());
  });

  it('ignores the key order of the body, recursively', async () => {
    await forSamples(
      f,
      fc.tuple(jsonBody, fc.integer()),
      ([body, seed]) => [{ value: reorderKeys(body, shuffler(seed)) }, { value: body }],
      (_sample, [shuffled, original]) => expect(shuffled).toEqual(original),
    );
  });

  it('distinguishes arrays in a different order', async () => {
    expect(await fingerprint('POST', '/x', { items: ['a', 'b'] })).not.toEqual(await fingerprint('POST', '/x', { items: ['b', 'a'] }));
  });

  it('distinguishes no body (undefined) from an empty object, empty array, null and ""', async () => {
    const fps = await f.of([undefined, {}, [], null, ''].map((value) => ({ value })));
    expect(new Set(fps).size).toBe(fps.length);
  });

  it('differs whenever the canonical body differs (property)', async () => {
    // Two JSON values have the same canonical body exactly when they are deep-equal as JSON (key order aside).
    const sameJson = (a: unknown, b: unknown) => isDeepStrictEqual(JSON.parse(JSON.stringify(a)), JSON.parse(JSON.stringify(b)));
    await forSamples(
      f,
      fc.tuple(jsonBody, jsonBody).filter(([a, b]) => !sameJson(a, b)),
      ([a, b]) => [{ value: a }, { value: b }],
      (_sample, [a, b]) => expect(a).not.toEqual(b),
    );
  });
});
