import { LRUCache } from 'lru-cache';
import { ClaimRequest, IdempotencyStore, StoredResponse } from '../contract/idempotency.store';

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
}

/**
 * Completed responses of this process's keys, kept in memory so that a replay
 * is answered without a database round trip: an LRU cache (lru-cache) bounded
 * by `maxBytes`, whose entries each live until their own end. What is ours on
 * top of it:
 *
 * - The end. A completed key never changes until its retention ends: the
 *   claim, the takeover, the recovery job and the release only touch keys in
 *   progress, and the purge and the replace only keys past retention. An entry
 *   is therefore served only until the key's `expires_at`, counted from a moment
 *   no later than the database's `now()` that set or read it (the caller passes
 *   the time it sent the claim), and never longer than REPLAY_CACHE_MAX_AGE_MS.
 * - The fingerprint. A replay with another body is not answered here (the
 *   claim says 422). Only responses that committed are remembered (rememberCommitted).
 *
 * Sizes are the UTF-16 size of the strings plus a fixed overhead per entry.
 */
export class ReplayCache {
  private readonly entries?: LRUCache<string, Entry>;

  constructor(
    maxBytes: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    if (maxBytes > 0) {
      this.entries = new LRUCache<string, Entry>({
        maxSize: maxBytes,
        sizeCalculation: (entry, id) => entryBytes(id, entry.response),
        // Each entry's end is checked on the clock it was measured on, to the millisecond.
        perf: { now },
        ttlResolution: 0,
      });
    }
  }

  /** The stored response of this scope's key when it is here, fresh and for the same fingerprint. */
  get(scope: string, key: string, fingerprint: Buffer): StoredResponse | undefined {
    const entry = this.entries?.get(entryId(scope, key));
    return entry?.fingerprint.equals(fingerprint) ? entry.response : undefined;
  }

  /**
   * Keeps a stored response for replays from memory, once it is committed: not
   * while an outer unit of the app is still open around the request (it could
   * yet roll the response back), nor when the store cannot say how long the key
   * is kept (`retainedForMs` undefined).
   */
  rememberCommitted(
    store: Pick<IdempotencyStore, 'inUnit'>,
    request: Pick<ClaimRequest, 'scope' | 'key' | 'fingerprint'>,
    response: StoredResponse,
    retainedForMs: number | undefined,
    sentAt: number,
  ): void {
    if (retainedForMs === undefined || store.inUnit()) return;
    this.remember(request.scope, request.key, request.fingerprint, response, retainedForMs, sentAt);
  }

  /**
   * Remembers a committed response. `retainedForMs`: how long the database
   * keeps the key, as it said at a moment no earlier than `measuredAt`
   * (a performance.now() taken before the statement was sent).
   */
  remember(scope: string, key: string, fingerprint: Buffer, response: StoredResponse, retainedForMs: number, measuredAt: number): void {
    if (!this.entries) return;
    // lru-cache serves an entry while its age is at most `ttl` whole milliseconds:
    // one less than what is left, so it is never served at or past the end.
    const ttl = Math.ceil(measuredAt + Math.min(retainedForMs, REPLAY_CACHE_MAX_AGE_MS) - this.now()) - 1;
    // Written so that a retention the store could not tell (NaN) keeps nothing, and a ttl of 0 (forever, to lru-cache) never happens.
    if (!(ttl >= 1)) return;
    const id = entryId(scope, key);
    // Larger than the whole budget: not kept (lru-cache would refuse it too).
    if (entryBytes(id, response) > this.entries.maxSize) return;
    this.entries.set(id, { fingerprint, response }, { ttl });
  }

  /** Forgets every entry (e.g. a test that moves keys past their retention by hand). */
  clear(): void {
    this.entries?.clear();
  }

  get size(): { entries: number; bytes: number } {
    return { entries: this.entries?.size ?? 0, bytes: this.entries?.calculatedSize ?? 0 };
  }
}

function entryBytes(id: string, response: StoredResponse): number {
  return ENTRY_OVERHEAD_BYTES + 2 * (id.length + response.body.length + response.contentType.length + (response.location?.length ?? 0));
}

/** A scope never contains NUL (checkScope), so this joins scope and key unambiguously. */
function entryId(scope: string, key: string): string {
  return `${scope}\0${key}`;
}
