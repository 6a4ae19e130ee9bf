import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { canonicalJson, canonicalQuery, fingerprint } from '../../src/core/fingerprint';
import { jsonBody, reorderKeys, shuffler } from '../support/json-values';

/** The fingerprint's definition: the first 16 bytes of SHA-256. */
const sha = (s: string) => createHash('sha256').update(s).digest().subarray(0, 16);

describe('canonicalQuery', () => {
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
  ])('canonicalises %j to %j', (input, expected) => {
    expect(canonicalQuery(input)).toBe(expected);
  });

  it('is independent of parameter order', () => {
    const params = fc.array(fc.tuple(fc.string({ maxLength: 6 }), fc.string({ maxLength: 6 })), { maxLength: 10 });
    fc.assert(
      fc.property(params, fc.integer(), (pairs, seed) => {
        const shuffled = shuffler(seed)(pairs.map((_, i) => String(i))).map((i) => pairs[Number(i)]);
        const a = new URLSearchParams(pairs).toString();
        const b = new URLSearchParams(shuffled).toString();
        expect(canonicalQuery(b)).toBe(canonicalQuery(a));
      }),
    );
  });

  it('keeps every parameter (same multiset of pairs)', () => {
    const params = fc.array(fc.tuple(fc.string({ maxLength: 6 }), fc.string({ maxLength: 6 })), { maxLength: 10 });
    fc.assert(
      fc.property(params, (pairs) => {
        const out = [...new URLSearchParams(canonicalQuery(new URLSearchParams(pairs).toString()))];
        const key = (p: [string, string]) => JSON.stringify(p);
        expect(out.map(key).sort()).toEqual(pairs.map(key).sort());
      }),
    );
  });
});

describe('fingerprint', () => {
  const base = () => fingerprint('POST', '/orders?a=1&b=2', { amount: 100, currency: 'EUR' });

  it('is a 16-byte Buffer', () => {
    const fp = base();
    expect(Buffer.isBuffer(fp)).toBe(true);
    expect(fp).toHaveLength(16);
  });

  it('is the first 16 bytes of the SHA-256 of method, path, sorted query and canonical body joined by newlines', () => {
    expect(fingerprint('post', '/orders?b=2&a=1', { currency: 'EUR', amount: 100 })).toEqual(
      sha('POST\n/orders\na=1&b=2\n{"amount":100,"currency":"EUR"}'),
    );
    expect(fingerprint('GET', '/orders', undefined)).toEqual(sha('GET\n/orders\n\n'));
  });

  it('is stable across processes and releases (stored fingerprints must still match after a restart or deploy)', () => {
    // A pinned value computed once: any salt, clock, per-process state or change of encoding breaks it.
    // It is the first half of the 32 bytes earlier releases stored for the same request
    // (e76e...5c13): the IdempotencyKeysHashed migration truncates stored fingerprints to match.
    expect(base().toString('hex')).toBe('e76e8678bbb167c3cd40742689d169d6');
  });

  it('ignores the case of the method', () => {
    expect(fingerprint('post', '/orders?a=1&b=2', { amount: 100, currency: 'EUR' })).toEqual(base());
  });

  it('depends on the method', () => {
    expect(fingerprint('PUT', '/orders?a=1&b=2', { amount: 100, currency: 'EUR' })).not.toEqual(base());
  });

  it('depends on the path', () => {
    expect(fingerprint('POST', '/orders/1?a=1&b=2', { amount: 100, currency: 'EUR' })).not.toEqual(base());
    expect(fingerprint('POST', '/order?a=1&b=2', { amount: 100, currency: 'EUR' })).not.toEqual(base());
  });

  it('treats ?a=1&b=2 and ?b=2&a=1 as the same query', () => {
    expect(fingerprint('POST', '/orders?b=2&a=1', { amount: 100, currency: 'EUR' })).toEqual(base());
  });

  it('depends on the query values and names', () => {
    expect(fingerprint('POST', '/orders?a=1&b=3', { amount: 100, currency: 'EUR' })).not.toEqual(base());
    expect(fingerprint('POST', '/orders?a=1&c=2', { amount: 100, currency: 'EUR' })).not.toEqual(base());
    expect(fingerprint('POST', '/orders?a=1', { amount: 100, currency: 'EUR' })).not.toEqual(base());
    expect(fingerprint('POST', '/orders', { amount: 100, currency: 'EUR' })).not.toEqual(base());
  });

  it('treats an empty query ("?") like no query', () => {
    expect(fingerprint('GET', '/orders?', undefined)).toEqual(fingerprint('GET', '/orders', undefined));
  });

  it('depends on the body', () => {
    expect(fingerprint('POST', '/orders?a=1&b=2', { amount: 101, currency: 'EUR' })).not.toEqual(base());
    expect(fingerprint('POST', '/orders?a=1&b=2', { amount: '100', currency: 'EUR' })).not.toEqual(base());
    expect(fingerprint('POST', '/orders?a=1&b=2', { amount: 100 })).not.toEqual(base());
  });

  it('ignores the key order of the body, recursively', () => {
    fc.assert(
      fc.property(jsonBody, fc.integer(), (body, seed) => {
        expect(fingerprint('POST', '/x', reorderKeys(body, shuffler(seed)))).toEqual(fingerprint('POST', '/x', body));
      }),
    );
  });

  it('distinguishes arrays in a different order', () => {
    expect(fingerprint('POST', '/x', { items: ['a', 'b'] })).not.toEqual(fingerprint('POST', '/x', { items: ['b', 'a'] }));
  });

  it('distinguishes no body (undefined) from an empty object, empty array, null and ""', () => {
    const fps = [undefined, {}, [], null, ''].map((body) => fingerprint('POST', '/x', body).toString('hex'));
    expect(new Set(fps).size).toBe(fps.length);
  });

  it('differs whenever the canonical body differs (property)', () => {
    fc.assert(
      fc.property(jsonBody, jsonBody, (a, b) => {
        fc.pre(canonicalJson(a) !== canonicalJson(b));
        expect(fingerprint('POST', '/x', a)).not.toEqual(fingerprint('POST', '/x', b));
      }),
    );
  });
});
