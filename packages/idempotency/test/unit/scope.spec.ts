import { MAX_SCOPE_LENGTH, checkScope } from '../../src/core/scope';

/** The scope a key is stored under (hashed into keyId, and kept in a recovery point). */
describe('checkScope', () => {
  it.each(['42', 'acct_9f3', '7c9e6679-7425-40de-944b-e07fc1f90ae7', 'p'.repeat(MAX_SCOPE_LENGTH), 'ünïcødé'])('accepts %s', (scope) => {
    expect(checkScope(scope)).toBe(scope);
  });

  it.each([
    ['undefined', undefined, /returned undefined/],
    ['a number', 42, /returned 42/],
    ['an empty string', '', /returned an empty string/],
    ['a string over the limit', 'p'.repeat(MAX_SCOPE_LENGTH + 1), /256 characters; a scope is at most 255/],
    // keyId joins scope and key with a NUL, and a recovery point keeps the scope in jsonb, which cannot hold one.
    ['a string with NUL', 'a\0b', /NUL/],
  ])('refuses %s', (_case, scope, message) => {
    expect(() => checkScope(scope)).toThrow(message);
  });
});
