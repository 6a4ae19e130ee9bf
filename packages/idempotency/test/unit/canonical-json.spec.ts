import fc from 'fast-check';
import { Fingerprints, canonicalText, definedFingerprint, fingerprints, forSamples } from '../support/fingerprints';
import { jsonBody, reorderKeys, reverse, shuffler } from '../support/json-values';

/**
 * The canonical JSON of a request's body, as the fingerprint the module
 * stores commits to it (support/fingerprints.ts): a body whose stored
 * fingerprint is the defined fingerprint of a text is that text. Each value
 * is what the route's `fingerprint(req)` option gives the module.
 */
let f: Fingerprints;
beforeAll(async () => (f = await fingerprints()));
afterAll(() => f?.close());

/** The fingerprint of a body whose canonical JSON is `text`. */
const ofText = (text: string) => definedFingerprint('POST', '/x', '', text);
const ofValue = (value: unknown) => f.ofValue(value);

describe('canonical JSON', () => {
  it('is the same for any order of object keys, recursively (shuffled)', async () => {
    await forSamples(
      f,
      fc.tuple(jsonBody, fc.integer()),
      ([value, seed]) => [{ value: reorderKeys(value, shuffler(seed)) }, { value }],
      (_sample, [shuffled, original]) => expect(shuffled).toBe(original),
      500,
    );
  });

  it('is the same for any order of object keys, recursively (fc.object, reversed and shuffled)', async () => {
    await forSamples(
      f,
      fc.tuple(fc.object({ maxDepth: 4 }), fc.integer()),
      ([value, seed]) => [{ value }, { value: reorderKeys(value, reverse) }, { value: reorderKeys(value, shuffler(seed)) }],
      (_sample, [canonical, reversed, shuffled]) => {
        expect(reversed).toBe(canonical);
        expect(shuffled).toBe(canonical);
      },
    );
  });

  it('is valid JSON that parses back to a deep-equal value', async () => {
    await forSamples(
      f,
      jsonBody,
      (value) => [{ value }],
      (value, [stored]) => {
        // The stored fingerprint is that of this text, which parses back (JSON.parse(JSON.stringify(-0)) is 0: compare against the JSON round trip).
        expect(stored).toBe(ofText(canonicalText(value)));
        expect(JSON.parse(canonicalText(value))).toEqual(JSON.parse(JSON.stringify(value)));
      },
      500,
    );
  });

  it('equals JSON.stringify of the value rebuilt with sorted keys (same escaping, no whitespace)', async () => {
    // JS objects list integer-like keys ("0", "10") first in numeric order, whatever the
    // insertion order, so JSON.stringify can only be the oracle for non-integer keys:
    // prefix every key (a common prefix keeps the sort order).
    const prefixKeys = (v: unknown): unknown =>
      Array.isArray(v)
        ? v.map(prefixKeys)
        : v !== null && typeof v === 'object'
          ? Object.fromEntries(Object.entries(v).map(([k, x]) => [`k${k}`, prefixKeys(x)]))
          : v;
    await forSamples(
      f,
      jsonBody.map(prefixKeys),
      (value) => [{ value }],
      (value, [stored]) => {
        const sorted = reorderKeys(value, (keys) => [...keys].sort());
        expect(stored).toBe(ofText(JSON.stringify(sorted)));
      },
      500,
    );
  });

  it('sorts integer-like keys as strings too (not in the numeric order JS objects use)', async () => {
    expect(await ofValue({ 9: 'a', 10: 'b', x: 'c', '': 'd' })).toBe(ofText('{"":"d","10":"b","9":"a","x":"c"}'));
  });

  it('emits object keys in sorted order at every depth', async () => {
    expect(await ofValue({ b: 1, a: { d: [{ z: 1, y: 2 }], c: 2 } })).toBe(ofText('{"a":{"c":2,"d":[{"y":2,"z":1}]},"b":1}'));
  });

  it('keeps array order: a different order is a different output', async () => {
    expect(await ofValue([1, 2, 3])).toBe(ofText('[1,2,3]'));
    expect(await ofValue([3, 2, 1])).toBe(ofText('[3,2,1]'));
    await forSamples(
      f,
      fc.uniqueArray(fc.jsonValue(), { minLength: 2, maxLength: 8, selector: (v) => JSON.stringify(v) }),
      (items) => [{ value: [...items].reverse() }, { value: items }],
      (_items, [reversed, items]) => expect(reversed).not.toBe(items),
    );
  });

  it('has no insignificant whitespace', async () => {
    expect(await ofValue({ a: [1, { b: null }], c: 'x y' })).toBe(ofText('{"a":[1,{"b":null}],"c":"x y"}'));
    await forSamples(
      f,
      jsonBody,
      (value) => [{ value }],
      (value, [stored]) => {
        const out = canonicalText(value);
        expect(stored).toBe(ofText(out));
        // Whitespace can only appear inside strings: strip string literals and look.
        const outsideStrings = out.replace(/"(?:[^"\\]|\\.)*"/g, '""');
        expect(outsideStrings).not.toMatch(/\s/);
      },
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
  ])('%s', async (_name, value, expected) => {
    expect(await ofValue(value)).toBe(ofText(expected));
  });

  it.each([
    ['é', 'café'],
    ['an emoji (surrogate pair)', 'key-🔑'],
    ['control characters', 'a\n\t\r\0\x1f\x7fb'],
    ['quotes and backslashes', 'say "hi" \\ bye'],
    ['a lone high surrogate', 'x\ud800y'],
    ['a lone low surrogate', 'x\udc00y'],
    ['U+2028 / U+2029', '\u2028\u2029'],
  ])('escapes a string with %s exactly as JSON.stringify does, in values and in keys', async (_name, s) => {
    expect(await f.of([{ value: s }, { value: { [s]: s } }, { value: [s] }])).toEqual(
      [JSON.stringify(s), JSON.stringify({ [s]: s }), JSON.stringify([s])].map(ofText),
    );
  });

  it('escapes every string as JSON.stringify would (property over all of Unicode, lone surrogates included)', async () => {
    await forSamples(
      f,
      fc.tuple(fc.string({ unit: 'binary' }), fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)) })),
      ([a, b]) => [{ value: a }, { value: b }, { value: { [b]: a } }],
      ([a, b], stored) => expect(stored).toEqual([JSON.stringify(a), JSON.stringify(b), JSON.stringify({ [b]: a })].map(ofText)),
      500,
    );
  });

  it('keeps a "__proto__" key from a parsed body as an ordinary key', async () => {
    const body = JSON.parse('{"__proto__":{"x":1},"a":2}');
    expect(await ofValue(body)).toBe(ofText('{"__proto__":{"x":1},"a":2}'));
  });

  it('distinguishes values that differ only in type', async () => {
    const outputs = await f.of([1, '1', true, 'true', null, 'null', [], {}, [1], { 0: 1 }, ''].map((value) => ({ value })));
    expect(new Set(outputs).size).toBe(outputs.length);
  });
});
