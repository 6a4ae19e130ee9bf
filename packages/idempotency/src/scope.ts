/** The longest scope (principal id) a key can be stored under. */
export const MAX_SCOPE_LENGTH = 255;

/**
 * The scope a key is stored under: any non-empty string the app's `scope`
 * returns (a UUID, `42`, `acct_9f3`). Anything else is a wiring mistake of the
 * app, answered 500 with the reason in the log, never a key shared by everyone.
 */
export function checkScope(scope: unknown): string {
  if (typeof scope !== 'string' || scope.length === 0) {
    const got = typeof scope === 'string' ? 'an empty string' : String(scope);
    throw new Error(
      `@Idempotent(): the scope function returned ${got}; it must return the id of the request's principal as a non-empty string (is the route behind the app's authentication?)`,
    );
  }
  if (scope.includes('\0')) {
    throw new Error('@Idempotent(): the scope function returned a string with a NUL character; a scope is text without NUL');
  }
  if (scope.length > MAX_SCOPE_LENGTH) {
    throw new Error(`@Idempotent(): the scope function returned ${scope.length} characters; a scope is at most ${MAX_SCOPE_LENGTH}`);
  }
  return scope;
}
