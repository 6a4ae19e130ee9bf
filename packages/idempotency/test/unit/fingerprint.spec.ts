import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { canonicalJson, canonicalQuery, fingerprint } from '../../src/fingerprint';

/**
 * Rebuilds a JSON value with the keys of every object (at every depth) in the
 * order given by `order`. Object.fromEntries defines own data properties, so a
 * "__proto__" key stays an ordinary key, as it is after JSON.parse.
 */
function reorderKeys(value: unknown, order: (keys: string[]) => string[]): unknown {
  if (Array.isArray(value)) return value.map((item) => reorderKeys(item, order));
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  return Object.fromEntries(order(Object.keys(record)).map((k) => [k, reorderKeys(record[k], order)]));
}

/** A deterministic pseudo-random permutation driven by a seed (Fisher-Yates over an LCG). */
function shuffler(seed: number): (keys: string[]) => string[] {
  let state = seed >>> 0 || 1;
  const next = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state;
  };
  return (keys) => {
    const out = [...keys];
    for (let i = out.length - 1; i > 0; i--) {
      const j = next() % (i + 1);
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  };
}

const reverse = (keys: string[]) => [...keys].reverse();

/** JSON values as a body parser would produce them (no -0: JSON.parse('-0') is -0 but it prints as 0). */
const jsonBody = fc.jsonValue();

/** The fingerprint's definition: the first 16 bytes of SHA-256. */
const sha = (s: string) => createHash('sha256').update(s).digest().subarray(0, 16);

describe('canonicalJson', () => {
  it('is the same for any order of object keys, recursively (shuffled)', () => {
    fc.assert(
      fc.property(jsonBody, fc.integer(), (value, seed) => {
        expect(canonicalJson(reorderKeys(value, shuffler(seed)))).toBe(canonicalJson(value));
      }),
      { numRuns: 500 },
    );
  });

  it('is the same for any order of object keys, recursively (fc.object, reversed and shuffled)', () => {
    fc.assert(
      fc.property(fc.object({ maxDepth: 4 }), fc.integer(), (value, seed) => {
        const canonical = canonicalJson(value);
        expect(canonicalJson(reorderKeys(value, reverse))).toBe(canonical);
        expect(canonicalJson(reorderKeys(value, shuffler(seed)))).toBe(canonical);
      }),
    );
  });

  it('is valid JSON that parses back to a deep-equal value', () => {
    fc.assert(
      fc.property(jsonBody, (value) => {
        // JSON.parse(JSON.stringify(-0)) is 0: compare against the JSON round trip.
        expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)));
      }),
      { numRuns: 500 },
    );
  });

  it('equals JSON.stringify of the value rebuilt with sorted keys (same escaping, no whitespace)', () => {
    // JS objects list integer-like keys ("0", "10") first in numeric order, whatever the
    // insertion order, so JSON.stringify can only be the oracle for non-integer keys:
    // prefix every key (a common prefix keeps the sort order).
    const prefixKeys = (v: unknown): unknown =>
      Array.isArray(v)
        ? v.map(prefixKeys)
        : v !== null && typeof v === 'object'
          ? Object.fromEntries(Object.entries(v).map(([k, x]) => [`k${k}`, prefixKeys(x)]))
          : v;
    fc.assert(
      fc.property(jsonBody, (raw) => {
        const value = prefixKeys(raw);
        const sorted = reorderKeys(value, (keys) => [...keys].sort());
        expect(canonicalJson(value)).toBe(JSON.stringify(sorted));
      }),
      { numRuns: 500 },
    );
  });

  it('sorts integer-like keys as strings too (not in the numeric order JS objects use)', () => {
    expect(canonicalJson({ 9: 'a', 10: 'b', x: 'c', '': 'd' })).toBe('{"":"d","10":"b","9":"a","x":"c"}');
  });

  it('emits object keys in sorted order at every depth', () => {
    expect(canonicalJson({ b: 1, a: { d: [{ z: 1, y: 2 }], c: 2 } })).toBe('{"a":{"c":2,"d":[{"y":2,"z":1}]},"b":1}');
  });

  it('keeps array order: a different order is a different output', () => {
    expect(canonicalJson([1, 2, 3])).toBe('[1,2,3]');
    expect(canonicalJson([3, 2, 1])).toBe('[3,2,1]');
    fc.assert(
      fc.property(fc.uniqueArray(fc.jsonValue(), { minLength: 2, maxLength: 8, selector: (v) => JSON.stringify(v) }), (items) => {
        const reversed = [...items].reverse();
        expect(canonicalJson(reversed)).not.toBe(canonicalJson(items));
      }),
    );
  });

  it('has no insignificant whitespace', () => {
    expect(canonicalJson({ a: [1, { b: null }], c: 'x y' })).toBe('{"a":[1,{"b":null}],"c":"x y"}');
    fc.assert(
      fc.property(jsonBody, (value) => {
        const out = canonicalJson(value);
        // Whitespace can only appear inside strings: strip string literals and look.
        const outsideStrings = out.replace(/"(?:[^"\\]|\\.)*"/g, '""');
        expect(outsideStrings).not.toMatch(/\s/);
      }),
    );
  });

  it.each<[string, unknown, string]>([
    ['null', null, 'null'],
    ['true', true, 'true'],
    ['false', false, 'false'],
    ['zero', 0, '0'],
    ['a negative float', -1.5, '-1.5'],
    ['a big exponent', 1e21, '1e+21'],
    ['NaN (no JSON form)', NaN, 'null'],
    ['Infinity (no JSON form)', Infinity, 'null'],
    ['an empty string', '', '""'],
    ['an empty object', {}, '{}'],
    ['an empty array', [], '[]'],
    ['undefined (no body)', undefined, ''],
    ['undefined inside an array', [1, undefined, 2], '[1,null,2]'],
    ['an undefined property (dropped)', { a: undefined, b: 1 }, '{"b":1}'],
    ['a null property (kept)', { a: null }, '{"a":null}'],
  ])('%s', (_name, value, expected) => {
    expect(canonicalJson(value)).toBe(expected);
  });

  it.each([
    ['é', 'café'],
    ['an emoji (surrogate pair)', 'key-🔑'],
    ['control characters', 'a\n\t\r\0\x1f\x7fb'],
    ['quotes and backslashes', 'say "hi" \\ bye'],
    ['a lone high surrogate', 'x\ud800y'],
    ['a lone low surrogate', 'x\udc00y'],
    ['U+2028 / U+2029', '\u2028\u2029'],
  ])('escapes a string with %s exactly as JSON.stringify does, in values and in keys', (_name, s) => {
    expect(canonicalJson(s)).toBe(JSON.stringify(s));
    expect(canonicalJson({ [s]: s })).toBe(JSON.stringify({ [s]: s }));
    expect(canonicalJson([s])).toBe(JSON.stringify([s]));
  });

  it('escapes every string as JSON.stringify would (property over all of Unicode, lone surrogates included)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)) }), (a, b) => {
        expect(canonicalJson(a)).toBe(JSON.stringify(a));
        expect(canonicalJson(b)).toBe(JSON.stringify(b));
        expect(canonicalJson({ [b]: a })).toBe(JSON.stringify({ [b]: a }));
      }),
      { numRuns: 500 },
    );
  });

  it('keeps a "__proto__" key from a parsed body as an ordinary key', () => {
    const body = JSON.parse('{"__proto__":{"x":1},"a":2}');
    expect(canonicalJson(body)).toBe('{"__proto__":{"x":1},"a":2}');
  });

  it('distinguishes values that differ only in type', () => {
    const outputs = [1, '1', true, 'true', null, 'null', [], {}, [1], { 0: 1 }, ''].map((v) => canonicalJson(v));
    expect(new Set(outputs).size).toBe(outputs.length);
  });
});

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
