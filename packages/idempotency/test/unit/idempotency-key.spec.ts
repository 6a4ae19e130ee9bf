import fc from 'fast-check';
import { KeyLookups, keyLookups, quoteIdempotencyKey } from '../support/key-lookups';

/** The longest key (docs/options.md, the OpenAPI document): 255 characters. */
const MAX_KEY_LENGTH = 255;

/** The key as IdempotencyKeys reads it (the header's reading), through one app for the file. */
let keys: KeyLookups;
beforeAll(async () => (keys = await keyLookups()));
afterAll(() => keys?.close());
const parseIdempotencyKey = (raw: string) => keys.parse(raw);

/** One printable ASCII character, 0x20..0x7E (the whole allowed alphabet). */
const printableChar = fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code));

/** A valid key: 1..255 printable ASCII characters. */
const validKey = fc.array(printableChar, { minLength: 1, maxLength: MAX_KEY_LENGTH }).map((chars) => chars.join(''));

/**
 * A valid key that survives being sent bare: the header value is OWS-trimmed
 * (spaces and tabs) before anything else, and a bare value starting with '"' is
 * read as an sf-string. Such keys must be sent quoted instead.
 */
const bareSafeKey = validKey.filter((k) => !k.startsWith('"') && !/^[ \t]|[ \t]$/.test(k));

/** A character outside 0x20..0x7E: C0 controls, DEL, Latin-1, BMP, astral. */
const forbiddenChar = fc.oneof(
  fc.integer({ min: 0x00, max: 0x1f }).map((c) => String.fromCharCode(c)),
  fc.constant('\x7f'),
  fc.integer({ min: 0x80, max: 0xd7ff }).map((c) => String.fromCharCode(c)),
  fc.integer({ min: 0xe000, max: 0xffff }).map((c) => String.fromCharCode(c)),
  fc.integer({ min: 0x10000, max: 0x10ffff }).map((c) => String.fromCodePoint(c)),
);

/** A valid-length key with at least one forbidden character somewhere inside it. */
const keyWithForbiddenChar = fc
  .tuple(
    fc.array(printableChar, { maxLength: 100 }),
    forbiddenChar,
    fc.array(printableChar, { maxLength: 100 }),
  )
  // Keep the forbidden char strictly inside so the OWS trim cannot be what removes it
  // (a leading/trailing tab is trimmed, not rejected: see the OWS tests below).
  .map(([before, bad, after]) => `x${before.join('')}${bad}${after.join('')}x`);

const expectOk = async (raw: string, key: string) => expect(await parseIdempotencyKey(raw)).toEqual({ ok: true, key });
const expectRejected = async (raw: string, reason?: RegExp) => {
  const result = await parseIdempotencyKey(raw);
  expect(result.ok).toBe(false);
  if (!result.ok) {
    expect(typeof result.reason).toBe('string');
    expect(result.reason.length).toBeGreaterThan(0);
    if (reason) expect(result.reason).toMatch(reason);
  }
};

describe('the 255-character limit (published in docs/idempotency.md and the OpenAPI document)', () => {
  // Literal lengths, not MAX_KEY_LENGTH: changing the constant or the comparison changes a public contract.
  it('accepts 255 characters and rejects 256, bare and quoted', async () => {
    await expectOk('k'.repeat(255), 'k'.repeat(255));
    await expectOk(`"${'k'.repeat(255)}"`, 'k'.repeat(255));
    await expectRejected('k'.repeat(256), /longer than 255 characters/);
    await expectRejected(`"${'k'.repeat(256)}"`, /longer than 255 characters/);
  });
});

describe('the key IdempotencyKeys reads: properties', () => {
  it('every valid key sent quoted (sf-string) parses back to itself', async () => {
    await fc.assert(
      fc.asyncProperty(validKey, async (key) => {
        expect(await parseIdempotencyKey(quoteIdempotencyKey(key))).toEqual({ ok: true, key });
      }),
      { numRuns: 500 },
    );
  });

  it('every valid key not starting with \'"\' and without leading/trailing space or tab, sent bare, parses back to itself', async () => {
    await fc.assert(
      fc.asyncProperty(bareSafeKey, async (key) => {
        expect(await parseIdempotencyKey(key)).toEqual({ ok: true, key });
      }),
      { numRuns: 500 },
    );
  });

  it('bare and quoted forms of the same key normalise to the same key', async () => {
    await fc.assert(
      fc.asyncProperty(bareSafeKey, async (key) => {
        expect(await parseIdempotencyKey(key)).toEqual(await parseIdempotencyKey(quoteIdempotencyKey(key)));
      }),
    );
  });

  it('surrounding OWS (spaces/tabs) around either form is ignored', async () => {
    const ows = fc.array(fc.constantFrom(' ', '\t'), { maxLength: 5 }).map((a) => a.join(''));
    await fc.assert(
      fc.asyncProperty(validKey, ows, ows, async (key, pre, post) => {
        expect(await parseIdempotencyKey(`${pre}${quoteIdempotencyKey(key)}${post}`)).toEqual({ ok: true, key });
      }),
    );
    await fc.assert(
      fc.asyncProperty(bareSafeKey, ows, ows, async (key, pre, post) => {
        expect(await parseIdempotencyKey(`${pre}${key}${post}`)).toEqual({ ok: true, key });
      }),
    );
  });

  it('a bare key with leading/trailing spaces or tabs is trimmed (OWS); only the quoted form keeps inner-edge spaces', async () => {
    await fc.assert(
      fc.asyncProperty(bareSafeKey, fc.constantFrom(' ', '\t', '  ', ' \t'), async (key, pad) => {
        expect(await parseIdempotencyKey(`${pad}${key}${pad}`)).toEqual({ ok: true, key });
      }),
    );
    const shortBareSafeKey = bareSafeKey.filter((k) => k.length <= MAX_KEY_LENGTH - 4);
    await fc.assert(
      fc.asyncProperty(shortBareSafeKey, fc.constantFrom(' ', '  '), async (key, pad) => {
        const padded = `${pad}${key}${pad}`;
        expect(await parseIdempotencyKey(quoteIdempotencyKey(padded))).toEqual({ ok: true, key: padded });
      }),
    );
  });

  it('the parsed key is always 1..255 printable ASCII characters, whatever the input', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.string({ maxLength: 300 }), fc.string({ unit: 'binary', maxLength: 300 })), async (raw) => {
        const result = await parseIdempotencyKey(raw);
        if (result.ok) {
          expect(result.key.length).toBeGreaterThanOrEqual(1);
          expect(result.key.length).toBeLessThanOrEqual(MAX_KEY_LENGTH);
          expect(result.key).toMatch(/^[\x20-\x7e]+$/);
        } else {
          expect(result.reason).toEqual(expect.any(String));
        }
      }),
      { numRuns: 500 },
    );
  });

  it('rejects every key longer than 255 characters, bare and quoted', async () => {
    const tooLong = fc
      .array(printableChar, { minLength: MAX_KEY_LENGTH + 1, maxLength: 600 })
      .map((chars) => `k${chars.join('')}k`);
    await fc.assert(
      fc.asyncProperty(tooLong, async (key) => {
        await expectRejected(quoteIdempotencyKey(key), /longer than 255/);
        if (!key.startsWith('"')) await expectRejected(key, /longer than 255/);
      }),
    );
  });

  it('rejects every key containing a character outside 0x20..0x7E, bare and quoted', async () => {
    await fc.assert(
      fc.asyncProperty(keyWithForbiddenChar, async (key) => {
        await expectRejected(key, /printable ASCII/);
        await expectRejected(quoteIdempotencyKey(key), /printable ASCII/);
      }),
      { numRuns: 500 },
    );
  });

  it('rejects a quoted key with any escape other than \\" and \\\\', async () => {
    const badEscape = printableChar.filter((c) => c !== '"' && c !== '\\');
    await fc.assert(
      fc.asyncProperty(fc.array(printableChar.filter((c) => c !== '"' && c !== '\\'), { maxLength: 50 }), badEscape, async (body, c) => {
        await expectRejected(`"${body.join('')}\\${c}"`, /escape/);
      }),
    );
  });

  it('rejects anything after the closing quote', async () => {
    await fc.assert(
      fc.asyncProperty(validKey, fc.string({ minLength: 1, maxLength: 20 }), async (key, tail) => {
        fc.pre(!/^[ \t]*$/.test(tail)); // trailing OWS alone is trimmed
        const raw = `${quoteIdempotencyKey(key)}${tail}`;
        // Trailing OWS is trimmed from the whole value; what remains must not be after the quote.
        await expectRejected(raw);
      }),
    );
  });

  it('rejects a quoted key without its closing quote', async () => {
    await fc.assert(
      fc.asyncProperty(validKey, async (key) => {
        const quoted = quoteIdempotencyKey(key);
        const unterminated = quoted.slice(0, -1);
        // e.g. key ending in a backslash: the remaining '\\' is a complete escape, still unterminated
        await expectRejected(unterminated);
      }),
    );
  });
});

describe('the key IdempotencyKeys reads: examples', () => {
  it.each([
    ['a bare UUID', '8c1f5b2e-3a4d-4f6b-9c7e-1d2f3a4b5c6d', '8c1f5b2e-3a4d-4f6b-9c7e-1d2f3a4b5c6d'],
    ['a quoted UUID', '"8c1f5b2e-3a4d-4f6b-9c7e-1d2f3a4b5c6d"', '8c1f5b2e-3a4d-4f6b-9c7e-1d2f3a4b5c6d'],
    ['a single character', 'a', 'a'],
    ['a single quoted character', '"a"', 'a'],
    ['a bare key with inner spaces', 'order 42 retry', 'order 42 retry'],
    ['a bare key surrounded by OWS (trimmed)', ' \t abc \t ', 'abc'],
    ['a quoted key surrounded by OWS', '\t "abc"  ', 'abc'],
    ['a quoted key keeping its inner leading/trailing spaces', '"  abc  "', '  abc  '],
    ['a quoted key of one space', '" "', ' '],
    ['a quoted key with an escaped quote', '"say \\"hi\\""', 'say "hi"'],
    ['a quoted key with an escaped backslash', '"a\\\\b"', 'a\\b'],
    ['a quoted key that is only an escaped backslash', '"\\\\"', '\\'],
    ['a quoted key that is only an escaped quote', '"\\""', '"'],
    ['a bare key containing a quote not at the start', 'ab"cd', 'ab"cd'],
    ['a bare key ending in a quote', 'abc"', 'abc"'],
    ['a bare key containing backslashes (no escaping in bare form)', 'a\\nb', 'a\\nb'],
    ['a bare key of all punctuation', '!#$%&\'()*+,-./:;<=>?@[]^_`{|}~', '!#$%&\'()*+,-./:;<=>?@[]^_`{|}~'],
    ['a bare key of exactly 255 chars', 'k'.repeat(255), 'k'.repeat(255)],
    ['a quoted key of exactly 255 chars', `"${'k'.repeat(255)}"`, 'k'.repeat(255)],
    ['a quoted key of 255 chars counting escapes as one char', `"${'\\"'.repeat(255)}"`, '"'.repeat(255)],
  ])('accepts %s', async (_name, raw, key) => {
    await expectOk(raw, key);
  });

  it.each([
    ['an empty value', '', /empty/],
    ['only whitespace', '   \t ', /empty/],
    ['an empty quoted string', '""', /empty/],
    ['OWS around an empty quoted string', ' "" ', /empty/],
    ['256 bare chars', 'k'.repeat(256), /longer than 255/],
    ['256 quoted chars', `"${'k'.repeat(256)}"`, /longer than 255/],
    ['256 escaped chars', `"${'\\\\'.repeat(256)}"`, /longer than 255/],
    ['a bare key with a newline', 'ab\ncd', /printable ASCII/],
    ['a bare key with CR LF inside', 'ab\r\ncd', /printable ASCII/],
    ['a bare key with an inner tab', 'ab\tcd', /printable ASCII/],
    ['a bare key with NUL', 'ab\0cd', /printable ASCII/],
    ['a bare key with DEL', 'ab\x7fcd', /printable ASCII/],
    ['a bare key with é', 'café', /printable ASCII/],
    ['a bare key with an emoji', 'key-🔑', /printable ASCII/],
    ['a bare key with a non-breaking space', 'a\u00a0b', /printable ASCII/],
    ['a quoted key with a newline', '"ab\ncd"', /printable ASCII/],
    ['a quoted key with an inner tab', '"ab\tcd"', /printable ASCII/],
    ['a quoted key with DEL', '"ab\x7fcd"', /printable ASCII/],
    ['a quoted key with é', '"café"', /printable ASCII/],
    ['a quoted key with an emoji', '"🔑"', /printable ASCII/],
    ['a quoted key with the escape \\n', '"ab\\ncd"', /escape/],
    ['a quoted key with the escape \\x', '"ab\\x41"', /escape/],
    ['a quoted key with the escape \\u', '"\\u0041"', /escape/],
    ['a quoted key with an escaped space', '"a\\ b"', /escape/],
    ['a quoted key ending in a lone backslash before the quote (escaped quote, then unterminated)', '"abc\\"', /closing quote/],
    ['a lone quote', '"', /closing quote/],
    ['an unterminated quoted key', '"abc', /closing quote/],
    ['an unterminated quoted key ending in a backslash', '"abc\\', /escape/],
    ['characters after the closing quote', '"abc"def', /after the closing quote/],
    ['a second quoted string', '"abc" "def"', /after the closing quote/],
    ['sf-string parameters', '"abc";a=1', /after the closing quote/],
    ['an unescaped inner quote', '"ab"cd"', /after the closing quote/],
    ['two quotes then a key', '""abc', /after the closing quote/],
  ])('rejects %s', async (_name, raw, reason) => {
    await expectRejected(raw, reason);
  });

  it('returns a reason and no key on rejection', async () => {
    const result = await parseIdempotencyKey('');
    expect(result).toEqual({ ok: false, reason: expect.any(String) });
    expect(result).not.toHaveProperty('key');
  });
});

describe('quoteIdempotencyKey (the sf-string form the cases send)', () => {
  it.each([
    ['abc', '"abc"'],
    ['', '""'],
    ['a"b', '"a\\"b"'],
    ['a\\b', '"a\\\\b"'],
    ['\\"', '"\\\\\\""'],
    [' x ', '" x "'],
  ])('quotes %j as %j', (key, quoted) => {
    expect(quoteIdempotencyKey(key)).toBe(quoted);
  });

  it('always produces a value that starts and ends with a quote and has every inner quote/backslash escaped', () => {
    fc.assert(
      fc.property(validKey, (key) => {
        const quoted = quoteIdempotencyKey(key);
        expect(quoted.startsWith('"')).toBe(true);
        expect(quoted.endsWith('"')).toBe(true);
        const inner = quoted.slice(1, -1);
        // Inner text is a sequence of non-special characters and \" / \\ escapes only.
        expect(inner).toMatch(/^(?:[^"\\]|\\["\\])*$/);
        const specials = (key.match(/["\\]/g) ?? []).length;
        expect(quoted.length).toBe(key.length + 2 + specials);
      }),
    );
  });
});
