import { StoredResponse } from './idempotency.store';

/**
 * The longest a response is served from memory before the database is asked
 * again. It bounds how far this process's clock may run apart from the
 * database's while an entry lives (100 ppm of a minute is 6 ms), so the
 * retention stays measured on the database clock.
 */
export const REPLAY_CACHE_MAX_AGE_MS = 60_000;

/** What an entry costs besides its strings (the map slot, the objects, the fingerprint). */
const ENTRY_OVERHEAD_BYTES = 200;

interface Entry {
  fingerprint: Buffer;
  response: StoredResponse;
  /** performance.now() past which the entry is not served. */
  until: number;
  bytes: number;
}

/**
 * Completed responses of this process's keys, kept in memory so that a replay
 * is answered without a database round trip.
 *
 * Sound because a completed key never changes until its retention ends: the
 * claim, the takeover, the recovery job and the release only touch keys in
 * progress, and the purge and the replace only keys past retention. An entry is
 * therefore served only until the key's `expires_at`, counted from a moment no
 * later than the database's `now()` that set or read it (the caller passes the
 * time it sent the claim), and never longer than REPLAY_CACHE_MAX_AGE_MS.
 * A replay with another body is not answered here (the claim says 422), and
 * only responses that committed are remembered (see the interceptor).
 *
 * Bounded by `maxBytes` (UTF-16 size of the strings plus a fixed overhead per
 * entry); the least recently used entries go first.
 */
export class ReplayCache {
  /** In order of use: the first entry is the least recently used. */
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The stored response of this scope's key when it is here, fresh and for the same fingerprint. */
  get(scope: string, key: string, fingerprint: Buffer): StoredResponse | undefined {
    const id = entryId(scope, key);
    const entry = this.entries.get(id);
    if (!entry) return undefined;
    if (this.now() >= entry.until) {
      this.drop(id, entry);
      return undefined;
    }
    if (!entry.fingerprint.equals(fingerprint)) return undefined;
    // Most recently used: to the end of the order.
    this.entries.delete(id);
    this.entries.set(id, entry);
    return entry.response;
  }

  /**
   * Remembers a committed response. `retainedForMs`: how long the database
   * keeps the key, as it said at a moment no earlier than `measuredAt`
   * (a performance.now() taken before the statement was sent).
   */
  remember(scope: string, key: string, fingerprint: Buffer, response: StoredResponse, retainedForMs: number, measuredAt: number): void {
    const until = measuredAt + Math.min(retainedForMs, REPLAY_CACHE_MAX_AGE_MS);
    // Written so that a retention the store could not tell (NaN) keeps nothing, rather than forever.
    if (!(until > this.now())) return;
    const id = entryId(scope, key);
    const bytes = ENTRY_OVERHEAD_BYTES + 2 * (id.length + response.body.length + response.contentType.length + (response.location?.length ?? 0));
    if (bytes > this.maxBytes) return;
    const previous = this.entries.get(id);
    if (previous) this.drop(id, previous);
    while (this.bytes + bytes > this.maxBytes) {
      const [oldestId, oldest] = this.entries.entries().next().value as [string, Entry];
      this.drop(oldestId, oldest);
    }
    this.entries.set(id, { fingerprint, response, until, bytes });
    this.bytes += bytes;
  }

  /** Forgets every entry (e.g. a test that moves keys past their retention by hand). */
  clear(): void {
    this.entries.clear();
    this.bytes = 0;
  }

  get size(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.bytes };
  }

  private drop(id: string, entry: Entry): void {
    this.entries.delete(id);
    this.bytes -= entry.bytes;
  }
}

/** A scope never contains NUL (checkScope), so this joins scope and key unambiguously. */
function entryId(scope: string, key: string): string {
  return `${scope}\0${key}`;
}
