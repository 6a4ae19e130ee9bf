import fc from 'fast-check';
import { canonicalJson } from '../../src/core/fingerprint';
import { jsonBody, reorderKeys, reverse, shuffler } from '../support/json-values';

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
