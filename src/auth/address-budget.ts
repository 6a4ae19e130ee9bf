import { Logger } from '@nestjs/common';
import { AsyncResource } from 'node:async_hooks';
import { LRUCache } from 'lru-cache';
import { addressKey } from '../addresses/client-address';

/** The window of an address's budget, and the interval of the summary line. */
export const WINDOW_MS = 60_000;

export interface AddressBudgetOptions {
  /** Failures an address may have in a window: the one that reaches it blocks the address until its window ends. */
  limit: number;
  /** Addresses counted at once below their limit; past it the least recently seen is forgotten. */
  maxCounted: number;
  /** What is counted, for the log: `failed authentication`. */
  failure: string;
  /** Its plural: `failed authentications`. */
  failures: string;
  logger: Logger;
}

interface Window {
  failures: number;
  /** performance.now() when the window of the address's first failure ends. */
  ends: number;
}

interface MinuteCounts {
  /** Failures counted. */
  failures: number;
  /** Addresses whose window started (their first failure of a window). */
  addresses: number;
  /** Addresses that reached their budget. */
  blocked: number;
  /** Requests refused because their address is blocked. */
  refused: number;
  /** Failures already written in a line of this minute. */
  told: number;
}

const noCounts = (): MinuteCounts => ({ failures: 0, addresses: 0, blocked: 0, refused: 0, told: 0 });

/**
 * A budget of failures per client address and minute, in this instance's
 * memory: the failure that reaches `limit` blocks the address until the
 * minute that began with its first failure ends. Addresses are counted by
 * addressKey (an IPv6 address by its /64).
 *
 * Addresses below their limit live in an LRU of `maxCounted` entries (about
 * 100 bytes each), so a flood from many addresses costs bounded memory.
 * Blocked addresses live apart, in a map that only time empties (each entry
 * leaves when its window ends, at the latest at the next summary): making room
 * for new addresses never unblocks one. Each blocked entry took `limit`
 * failures within its minute, so that map holds at most a minute's failures
 * divided by `limit`.
 *
 * The log never gets a line per address: the first failure after a quiet
 * minute is warned at once (with its address), then each minute with failures
 * or refusals is summed up in one line, until a minute passes without any.
 */
export class AddressBudget {
  readonly limit: number;
  private readonly logger: Logger;
  private readonly counted: LRUCache<string, Window>;
  private readonly blocked = new Map<string, number>();
  private minute = noCounts();
  /** Set while a minute is being counted: its end writes the summary line. */
  private summaryTimer?: NodeJS.Timeout;

  constructor(private readonly options: AddressBudgetOptions) {
    this.limit = options.limit;
    this.logger = options.logger;
    this.counted = new LRUCache({ max: options.maxCounted });
  }

  /** Addresses counted below their limit now (never more than maxCounted). */
  get countedAddresses(): number {
    return this.counted.size;
  }

  /** Addresses blocked now (their windows not yet swept). */
  get blockedAddresses(): number {
    return this.blocked.size;
  }

  /** Seconds until the address's block ends, or undefined when it is not blocked. */
  blockedFor(address: string): number | undefined {
    const key = addressKey(address);
    const ends = this.blocked.get(key);
    if (ends === undefined) return undefined;
    const left = ends - performance.now();
    if (left > 0) return left / 1000;
    this.blocked.delete(key);
    return undefined;
  }

  /** Counts a failure of the address. */
  recordFailure(address: string): void {
    const quiet = this.summaryTimer === undefined;
    this.minute.failures++;
    this.countMinute();
    if (quiet) {
      this.minute.told = this.minute.failures;
      this.logger.warn({ address: addressKey(address) }, `${this.options.failure} (then one summary line a minute while failures go on)`);
    }
    // A failure of a request let in before its address was blocked: the block stands as it is.
    if (this.blockedFor(address) !== undefined) return;
    const key = addressKey(address);
    const now = performance.now();
    let window = this.counted.get(key);
    if (window === undefined || window.ends <= now) {
      window = { failures: 0, ends: now + WINDOW_MS };
      this.minute.addresses++;
    }
    window.failures++;
    if (window.failures < this.limit) {
      this.counted.set(key, window);
      return;
    }
    this.counted.delete(key);
    this.blocked.set(key, window.ends);
    this.minute.blocked++;
  }

  /** Counts a request refused because its address is blocked. */
  recordRefusal(): void {
    this.minute.refused++;
    this.countMinute();
  }

  /**
   * Writes the summary line of the minute now, if it had failures or refusals
   * not written yet, and drops the blocks that have ended; the timer calls it
   * at the end of each minute.
   */
  writeSummary(): void {
    clearTimeout(this.summaryTimer);
    this.summaryTimer = undefined;
    const now = performance.now();
    for (const [key, ends] of this.blocked) if (ends <= now) this.blocked.delete(key);
    const m = this.minute;
    this.minute = noCounts();
    if (m.failures === m.told && m.refused === 0) return;
    this.logger.warn(
      { failures: m.failures, addresses: m.addresses, blocked: m.blocked, refused: m.refused, counting: this.counted.size, blocking: this.blocked.size },
      `${this.options.failures} in the last minute: ${m.blocked} addresses blocked, ${m.failures} failures from ${m.addresses} addresses, ${m.refused} requests refused`,
    );
    // The next minute is counted too: a flood that goes on writes one line a minute.
    this.countMinute();
  }

  /** Stops the summary timer (the app is closing). */
  stop(): void {
    clearTimeout(this.summaryTimer);
    this.summaryTimer = undefined;
  }

  /** Starts counting a minute, unless one is being counted. */
  private countMinute(): void {
    this.summaryTimer ??= this.startSummaryTimer();
  }

  /**
   * Bound to the context the budget was made in: a timer started during a
   * request would otherwise carry that request's context (and its id into the
   * summary line).
   */
  private readonly startSummaryTimer = AsyncResource.bind(() => setTimeout(() => this.writeSummary(), WINDOW_MS).unref());
}
