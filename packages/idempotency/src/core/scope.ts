import { idempotencyErrors } from '../contract/idempotency.errors';

/** The longest scope (principal id) a key can be stored under. */
export const MAX_SCOPE_LENGTH = 255;

/**
 * What is wrong with a scope, or undefined when it is one: any non-empty
 * string of at most 255 characters without NUL (a UUID, `42`, `acct_9f3`).
 */
export function scopeFault(scope: unknown): string | undefined {
  if (typeof scope !== 'string' || scope.length === 0) {
    return `returned ${typeof scope === 'string' ? 'an empty string' : String(scope)}; it must return the id of the request's principal as a non-empty string`;
  }
  if (scope.includes('\0')) return 'returned a string with a NUL character; a scope is text without NUL';
  if (scope.length > MAX_SCOPE_LENGTH) return `returned ${scope.length} characters; a scope is at most ${MAX_SCOPE_LENGTH}`;
  return undefined;
}

/** A scope the app's own code passes (IdempotencyKeys): a bad one is a plain error of that code. */
export function checkScope(scope: unknown): string {
  const fault = scopeFault(scope);
  if (fault !== undefined) throw new Error(`IdempotencyKeys: the scope ${fault}`);
  return scope as string;
}

/**
 * The scope of a request, from the app's `scope` (or a message handler's
 * `messageScope`). A bad one is a wiring mistake of the app, never a key shared
 * by everyone: the request gets the module's 500 `idempotency_scope_missing`
 * (naming no internals), and `refused` hears the reason, for the server's log.
 */
export function requestScope(scope: unknown, policyUrl: string | undefined, refused: (fault: string) => void): string {
  const fault = scopeFault(scope);
  if (fault === undefined) return scope as string;
  refused(fault);
  throw idempotencyErrors.scopeMissing(policyUrl);
}
