import crypto, { createHash } from 'node:crypto';
import fc from 'fast-check';
import { API_KEY_PREFIX, bearerToken, generateApiKey, hashApiKey, keyPrefix } from '../../src/auth/api-key';

const KEY_FORMAT = /^sk_[A-Za-z0-9_-]{43}$/;

describe('generateApiKey', () => {
  it("has the 'sk_' prefix", () => {
    expect(API_KEY_PREFIX).toBe('sk_');
    expect(generateApiKey().startsWith('sk_')).toBe(true);
  });

  it('is the prefix followed by 43 base64url characters (no padding)', () => {
    for (let i = 0; i < 200; i++) expect(generateApiKey()).toMatch(KEY_FORMAT);
  });

  it('carries at least 128 bits of randomness: the suffix decodes to 32 bytes', () => {
    const key = generateApiKey();
    const suffix = key.slice(API_KEY_PREFIX.length);
    const bytes = Buffer.from(suffix, 'base64url');
    expect(bytes.length).toBeGreaterThanOrEqual(16);
    expect(bytes.length).toBe(32);
    // base64url round-trips: the suffix is a canonical encoding of those bytes
    expect(bytes.toString('base64url')).toBe(suffix);
  });

  it('is unique: each key is a fresh 32-byte draw of the CSPRNG, every bit of it kept', () => {
    // A key is the encoding of its draw, which it decodes back to: two keys are equal only
    // when two 256-bit draws are. Two draws a single bit apart prove the last bit is kept.
    const draws = [Buffer.alloc(32, 0xa5), Buffer.alloc(32, 0xa5)];
    draws[1][31] ^= 1;
    const randomBytes = jest.spyOn(crypto, 'randomBytes');
    try {
      const keys = draws.map((draw) => {
        randomBytes.mockImplementationOnce(() => Buffer.from(draw));
        return generateApiKey();
      });
      expect(randomBytes.mock.calls).toEqual([[32], [32]]);
      expect(keys).toEqual(draws.map((draw) => `sk_${draw.toString('base64url')}`));
      expect(keys[0]).not.toBe(keys[1]);
      expect(keys.map((k) => Buffer.from(k.slice(API_KEY_PREFIX.length), 'base64url'))).toEqual(draws);
    } finally {
      randomBytes.mockRestore();
    }
    // Unmocked, consecutive keys come from consecutive draws.
    expect(generateApiKey()).not.toBe(generateApiKey());
  });

  it('uses the whole alphabet at every position (not a constant or low-entropy suffix)', () => {
    const keys = Array.from({ length: 2_000 }, () => generateApiKey().slice(3));
    // Every one of the first 42 positions carries 6 random bits: 2000 samples hit many symbols.
    for (let pos = 0; pos < 42; pos++) {
      const symbols = new Set(keys.map((k) => k[pos]));
      expect(symbols.size).toBeGreaterThan(40);
    }
    // The 43rd char holds the last 4 bits of 256: 16 possible symbols.
    expect(new Set(keys.map((k) => k[42])).size).toBe(16);
  });

  it('has roughly balanced bits (no stuck bits across samples)', () => {
    const samples = Array.from({ length: 1_000 }, () => Buffer.from(generateApiKey().slice(3), 'base64url'));
    for (let bit = 0; bit < 256; bit++) {
      const ones = samples.filter((b) => (b[bit >> 3] >> (bit & 7)) & 1).length;
      // Binomial(1000, 0.5): sd ~ 15.8; 6.3 sd either side
      expect(ones).toBeGreaterThan(400);
      expect(ones).toBeLessThan(600);
    }
  });
});

describe('hashApiKey', () => {
  it('is the 32-byte SHA-256 of the key (UTF-8)', () => {
    const key = generateApiKey();
    const hash = hashApiKey(key);
    expect(Buffer.isBuffer(hash)).toBe(true);
    expect(hash).toHaveLength(32);
    expect(hash.equals(createHash('sha256').update(key, 'utf8').digest())).toBe(true);
  });

  it('matches a known SHA-256 vector', () => {
    expect(hashApiKey('abc').toString('hex')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(hashApiKey('').toString('hex')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });

  it('hashes non-ASCII input as UTF-8', () => {
    expect(hashApiKey('é').equals(createHash('sha256').update(Buffer.from([0xc3, 0xa9])).digest())).toBe(true);
  });

  it('equals node:crypto SHA-256 for any string (property)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), (key) => {
        expect(hashApiKey(key).equals(createHash('sha256').update(key, 'utf8').digest())).toBe(true);
      }),
    );
  });

  it('is deterministic and differs for different keys', () => {
    const a = generateApiKey();
    const b = generateApiKey();
    expect(hashApiKey(a).equals(hashApiKey(a))).toBe(true);
    expect(hashApiKey(a).equals(hashApiKey(b))).toBe(false);
  });

  it('never equals or contains the key in any common encoding', () => {
    for (let i = 0; i < 200; i++) {
      const key = generateApiKey();
      const hash = hashApiKey(key);
      const suffix = key.slice(3);
      for (const encoding of ['hex', 'base64', 'base64url', 'latin1', 'utf8'] as const) {
        const text = hash.toString(encoding);
        expect(text).not.toBe(key);
        expect(text).not.toContain(key);
        expect(text).not.toContain(suffix);
      }
      expect(hash.includes(Buffer.from(key))).toBe(false);
      expect(hash.includes(Buffer.from(suffix, 'base64url'))).toBe(false);
    }
  });
});

describe('bearerToken', () => {
  it.each<[string, string]>([
    ['Bearer abc', 'abc'],
    ['bearer abc', 'abc'],
    ['BEARER abc', 'abc'],
    ['BeArEr abc', 'abc'],
    ['Bearer   abc', 'abc'],
    ['Bearer\tabc', 'abc'],
    ['Bearer abc   ', 'abc'],
    ['Bearer sk_abc-DEF_123', 'sk_abc-DEF_123'],
    ['Bearer abc==', 'abc=='],
    [`Bearer ${'x'.repeat(512)}`, 'x'.repeat(512)],
  ])('reads %j as %j', (header, token) => {
    expect(bearerToken(header)).toBe(token);
  });

  it('reads back any generated key', () => {
    for (let i = 0; i < 50; i++) {
      const key = generateApiKey();
      expect(bearerToken(`Bearer ${key}`)).toBe(key);
    }
  });

  it.each<[string, string | undefined]>([
    ['missing', undefined],
    ['empty', ''],
    ['Basic credentials', 'Basic YWxhZGRpbjpvcGVuc2VzYW1l'],
    ['a bare token', 'abc'],
    ['the scheme alone', 'Bearer'],
    ['the scheme and a space', 'Bearer '],
    ['the scheme and blanks', 'Bearer    '],
    ['no space after the scheme', 'Bearerabc'],
    ['two tokens', 'Bearer abc def'],
    ['a token over 512 chars', `Bearer ${'x'.repeat(513)}`],
    ['another scheme with Bearer inside', 'Token Bearer abc'],
    ['leading junk', 'xBearer abc'],
    ['a newline inside the token', 'Bearer ab\ncd'],
  ])('rejects %s', (_name, header) => {
    expect(bearerToken(header)).toBeUndefined();
  });

  it('returns a token without whitespace, at most 512 chars, for any input (property)', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 600 }), (rest) => {
        const token = bearerToken(`Bearer ${rest}`);
        if (token !== undefined) {
          expect(token).toMatch(/^\S{1,512}$/);
          expect(rest.trim()).toBe(token);
        }
      }),
    );
  });
});

describe('keyPrefix', () => {
  it('is the first 12 characters of a generated key', () => {
    const key = generateApiKey();
    expect(keyPrefix(key)).toBe(key.slice(0, 12));
  });

  it('never shows more than a third of a short secret', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 16, maxLength: 512 }), (secret) => {
        const prefix = keyPrefix(secret);
        expect(secret.startsWith(prefix)).toBe(true);
        expect(prefix.length).toBeLessThanOrEqual(Math.min(12, secret.length / 3));
      }),
    );
  });
});
