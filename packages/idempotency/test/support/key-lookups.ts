import { IdempotencyErrorCode, IdempotencyKeys, IdempotencyProblem } from 'safe-retries';
import { LibraryApp, createLibraryApp } from './library-app';

/**
 * How the module reads an Idempotency-Key and a scope, through what an app
 * injects: `IdempotencyKeys.outcome(scope, rawKey)` reads the key as the
 * header is read (bare or an RFC 8941 string) and answers the normalised key,
 * or throws the module's 400 `idempotency_key_invalid` with the reason; a bad
 * scope is an error naming what is wrong with it. One app and one store
 * lookup of an unknown key per call: a table of cases stays fast.
 */
export interface KeyLookups {
  /** The key `raw` is read as, or the reason it is refused (the problem's detail, without its advice). */
  parse(raw: string): Promise<{ ok: true; key: string } | { ok: false; reason: string }>;
  /** The outcome of `key` under `scope`, which the app's own code passes. */
  lookUp(scope: unknown, key: string): Promise<{ key: string; state: string }>;
  close(): Promise<void>;
}

const INVALID = /^The Idempotency-Key header is invalid: (.*)\. Send 1 to 255 printable ASCII characters, bare or as a quoted string\.$/s;

export async function keyLookups(): Promise<KeyLookups> {
  const lib: LibraryApp = await createLibraryApp();
  const keys = lib.app.get(IdempotencyKeys);
  return {
    async parse(raw) {
      try {
        return { ok: true, key: (await keys.outcome('key-lookups', raw)).key };
      } catch (error) {
        if (!(error instanceof IdempotencyProblem) || error.code !== IdempotencyErrorCode.KeyInvalid) throw error;
        expect(error.getStatus()).toBe(400);
        const reason = INVALID.exec(error.getResponse().detail);
        if (!reason) throw new Error(`not the module's key_invalid detail: ${error.getResponse().detail}`, { cause: error });
        return { ok: false, reason: reason[1] };
      }
    },
    lookUp: (scope, key) => keys.outcome(scope as string, key),
    close: () => lib.close(),
  };
}

/** The sf-string form of a key (RFC 8941): what a client that follows the IETF draft sends. */
export function quoteIdempotencyKey(key: string): string {
  return `"${key.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}
