import { AsyncResource } from 'node:async_hooks';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { addressKey } from '../addresses/client-address';

/** The interval of the digest's lines. */
export const DIGEST_INTERVAL_MS = 60_000;
/** Addresses held at once (about 150 bytes each); past it the least recently seen is written out early. */
const MAX_ADDRESSES = 10_000;

interface Held {
  /** 4xx answers after the address's first of the minute (not written as request lines). */
  count: number;
  statuses: Record<number, number>;
}

/**
 * The 4xx answers to requests without an API client (the public routes: a
 * webhook delivery with a bad signature, a docs path that does not exist),
 * per client address (addressKey) and minute: the first one's request line is
 * written, the others are counted, and the minute ends with one line per
 * address that had more: "N more 4xx answers ... from <address>". So an
 * address flooding bad requests writes two lines a minute, whatever it sends.
 */
export class ClientErrorDigest {
  private readonly held: LRUCache<string, Held>;
  private timer?: NodeJS.Timeout;

  constructor(private readonly logger: Logger) {
    this.held = new LRUCache<string, Held>({
      max: MAX_ADDRESSES,
      // An address pushed out early gets its line early: its count is not lost.
      dispose: (entry, address, reason) => {
        if (reason === 'evict') this.write(address, entry);
      },
    });
  }

  /** Whether this 4xx's request line is written: the address's first of the minute is, later ones are counted. */
  admit(address: string, status: number): boolean {
    this.timer ??= this.startTimer();
    const key = addressKey(address);
    const entry = this.held.get(key);
    if (entry === undefined) {
      this.held.set(key, { count: 0, statuses: {} });
      return true;
    }
    entry.count++;
    entry.statuses[status] = (entry.statuses[status] ?? 0) + 1;
    return false;
  }

  /** Writes the minute's line of each address with answers counted, and starts afresh (the timer calls it; so does closing). */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const entries = [...this.held.entries()];
    this.held.clear();
    for (const [address, entry] of entries) this.write(address, entry);
  }

  private write(address: string, { count, statuses }: Held): void {
    if (count === 0) return;
    this.logger.warn({ address, count, statuses }, `${count} more 4xx answers to requests without an API key from ${address} in the last minute`);
  }

  /** Bound to the context the digest was made in, not to the request whose answer started the minute. */
  private readonly startTimer = AsyncResource.bind(() => setTimeout(() => this.flush(), DIGEST_INTERVAL_MS).unref());
}
