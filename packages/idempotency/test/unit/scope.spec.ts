import { KeyLookups, keyLookups } from '../support/key-lookups';

/**
 * The scope a key is stored under (hashed into its row id, and kept in a
 * recovery point), as the app's own code passes it to IdempotencyKeys.
 */
describe('a scope passed to IdempotencyKeys', () => {
  let keys: KeyLookups;
  beforeAll(async () => (keys = await keyLookups()));
  afterAll(() => keys?.close());

  it.each(['42', 'acct_9f3', '7c9e6679-7425-40de-944b-e07fc1f90ae7', 'p'.repeat(255), 'ünïcødé'])('accepts %s', async (scope) => {
    await expect(keys.lookUp(scope, 'k')).resolves.toEqual({ key: 'k', state: 'unknown' });
  });

  it.each([
    ['undefined', undefined, /returned undefined/],
    ['a number', 42, /returned 42/],
    ['an empty string', '', /returned an empty string/],
    ['a string over the limit', 'p'.repeat(256), /256 characters; a scope is at most 255/],
    // A key's row id joins scope and key with a NUL, and a recovery point keeps the scope in jsonb, which cannot hold one.
    ['a string with NUL', 'a\0b', /NUL/],
  ])('refuses %s', async (_case, scope, message) => {
    await expect(keys.lookUp(scope, 'k')).rejects.toThrow(message);
  });
});
