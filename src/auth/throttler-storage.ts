import { AsyncResource } from 'node:async_hooks';
import type { OnApplicationShutdown } from '@nestjs/common';
import type { ThrottlerStorage } from '@nestjs/throttler';

/** As the default storage: once a minute. */
const DEFAULT_SWEEP_INTERVAL_MS = 60_000;
/** A queue's first buffer; it doubles when full and returns to this size when it empties. */
const INITIAL_CAPACITY = 8;

export interface SlidingWindowThrottlerStorageOptions {
  /** Milliseconds, as `Date.now()` (the default storage reads Date.now; a test passes its own clock). */
  now?: () => number;
  /** How often keys idle for a whole window are dropped. */
  sweepIntervalMs?: number;
}

type ThrottlerStorageRecord = Awaited<ReturnType<ThrottlerStorage['increment']>>;

/**
 * The throttler's hit counts, in this instance's memory, in O(1) amortised time per
 * request. It answers exactly what `@nestjs/throttler`'s own `ThrottlerStorageService`
 * (6.7) answers for the same calls at the same clock readings (test/unit/throttler-storage.spec.ts
 * runs both side by side), but that one rebuilds each key's array of hit expiries with
 * `filter()` on every request: O(hits in the window), so the cost of a request grows with
 * the limit (the bench sets 10⁹, every hit of the last second) and each request allocates.
 *
 * Here a throttler's hits on a key are a FIFO of expiry times. Every hit expires `ttl`
 * after it is counted and the clock moves forward, so the queue is sorted: the expired
 * hits are at its head, the count is its size and the oldest is its head. (An expiry
 * that would break the order, a ttl that changed between calls or a clock set back, is
 * inserted in its place, so the queue stays sorted whatever happens; that path is O(n)
 * and never taken with the app's constant ttl and a clock that does not go back.)
 *
 * What the guard reads, as the default storage computes it:
 * - `totalHits`: the live hits, this one included (a blocked request is not counted,
 *   so a key never holds more than `limit + 1` hits);
 * - `timeToExpire` (X-RateLimit-Reset, seconds): a fixed window per key, restarted at
 *   the first request after it ended; not derived from the hits;
 * - `isBlocked`: the key went over its limit less than `blockDuration` ago; the request
 *   that goes over is counted and refused, those after it are refused without being
 *   counted, and the first one after the block has ended starts afresh (its count is 1);
 * - `timeToBlockExpire` (Retry-After, seconds): meaningful only when blocked (otherwise
 *   it is whatever the formula gives, a negative number for a key never blocked, as the
 *   default returns).
 * With `blockDuration <= 0` (not used by this app) a request over the limit is refused
 * without blocking the key, as the default does.
 *
 * Keys idle for a whole window are dropped by a periodic sweep, so the memory follows
 * the clients of the last minute or so, not every client ever seen.
 *
 * Made by ThrottlerModule's options factory (its `storage`), not by the injector; Nest still
 * calls `onApplicationShutdown` on it, as on any provider's value.
 */
export class SlidingWindowThrottlerStorage implements ThrottlerStorage, OnApplicationShutdown {
  private readonly keys = new Map<string, KeyState>();
  private readonly now: () => number;
  private readonly sweepIntervalMs: number;
  private sweep?: NodeJS.Timeout;
  /**
   * Started by the first request, but bound to the context the storage was made in: a
   * timer keeps the async context it was created in (nestjs-cls's store of that first
   * request, its transaction) for as long as it runs.
   */
  private readonly startSweep = AsyncResource.bind(() => {
    this.sweep = setInterval(() => this.evictIdleKeys(), this.sweepIntervalMs);
    this.sweep.unref();
  });

  constructor(options: SlidingWindowThrottlerStorageOptions = {}) {
    this.now = options.now ?? (() => Date.now());
    this.sweepIntervalMs = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
  }

  /** How many keys are held (idle ones until the next sweep). */
  get keyCount(): number {
    return this.keys.size;
  }

  increment(key: string, ttl: number, limit: number, blockDuration: number, throttlerName: string): Promise<ThrottlerStorageRecord> {
    const now = this.now();
    if (this.sweep === undefined) this.startSweep();
    let state = this.keys.get(key);
    if (state === undefined) {
      state = { expiresAt: now + ttl, blockExpiresAt: 0, isBlocked: false, throttlerName, hits: new HitQueue() };
      this.keys.set(key, state);
    }
    const hits = state.throttlerName === throttlerName ? state.hits : otherHits(state, throttlerName);
    hits.dropExpired(now);

    let timeToExpire = Math.ceil((state.expiresAt - now) / 1000);
    if (timeToExpire <= 0) {
      state.expiresAt = now + ttl;
      timeToExpire = Math.ceil((state.expiresAt - now) / 1000);
    }

    if (blockDuration <= 0) {
      // Over the limit: refused, not counted, the key not blocked; Retry-After is when the oldest hit expires.
      const isBlocked = hits.size >= limit;
      if (!isBlocked) hits.push(now + ttl);
      const timeToBlockExpire = hits.size > 0 ? Math.ceil((hits.oldest - now) / 1000) : timeToExpire;
      return Promise.resolve({
        totalHits: hits.size + (isBlocked ? 1 : 0),
        timeToExpire,
        isBlocked,
        timeToBlockExpire: isBlocked ? timeToBlockExpire : 0,
      });
    }

    if (!state.isBlocked) {
      hits.push(now + ttl);
      if (hits.size > limit) {
        state.isBlocked = true;
        state.blockExpiresAt = now + blockDuration;
      }
    }
    const timeToBlockExpire = Math.ceil((state.blockExpiresAt - now) / 1000);
    if (timeToBlockExpire <= 0 && state.isBlocked) {
      // The block is over: this request starts the count afresh, whatever the earlier hits.
      state.isBlocked = false;
      hits.clear();
      hits.push(now + ttl);
    }
    return Promise.resolve({ totalHits: hits.size, timeToExpire, isBlocked: state.isBlocked, timeToBlockExpire });
  }

  /**
   * Drops the keys whose window, block and hits have all ended (the default's rule): the next
   * request of such a key gets from a fresh state the answer it would have got from the old one
   * (but for `timeToBlockExpire` of a request not blocked, which nothing reads).
   */
  evictIdleKeys(now = this.now()): void {
    for (const [key, state] of this.keys) {
      if (state.isBlocked && state.blockExpiresAt > now) continue;
      if (state.expiresAt > now) continue;
      if (hasLiveHits(state, now)) continue;
      this.keys.delete(key);
    }
  }

  onApplicationShutdown(): void {
    clearInterval(this.sweep);
    this.sweep = undefined;
    this.keys.clear();
  }
}

/** One throttler's hits on one key: their expiry times, oldest first, in a ring buffer that grows. */
class HitQueue {
  private buffer = new Float64Array(INITIAL_CAPACITY);
  /** buffer.length - 1; the capacity is a power of two. */
  private mask = INITIAL_CAPACITY - 1;
  private head = 0;
  size = 0;

  /** The earliest expiry (size > 0). */
  get oldest(): number {
    return this.buffer[this.head];
  }

  /** The latest expiry (size > 0). */
  get newest(): number {
    return this.buffer[(this.head + this.size - 1) & this.mask];
  }

  /** Forgets the hits that expired at `now` or before (the default keeps those with expiry > now). */
  dropExpired(now: number): void {
    while (this.size > 0 && this.buffer[this.head] <= now) {
      this.head = (this.head + 1) & this.mask;
      this.size--;
    }
    if (this.size === 0) this.clear();
  }

  push(expiresAt: number): void {
    if (this.size === this.buffer.length) this.relayout(this.buffer.length * 2);
    if (this.size === 0 || expiresAt >= this.newest) {
      this.buffer[(this.head + this.size) & this.mask] = expiresAt;
      this.size++;
      return;
    }
    // Out of order (see the file's comment): after the last expiry <= this one, in a laid-out buffer.
    this.relayout(this.buffer.length);
    let low = 0;
    let high = this.size;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.buffer[middle] <= expiresAt) low = middle + 1;
      else high = middle;
    }
    this.buffer.copyWithin(low + 1, low, this.size);
    this.buffer[low] = expiresAt;
    this.size++;
  }

  /** Forgets every hit; a buffer grown by a burst is given back. */
  clear(): void {
    this.head = 0;
    this.size = 0;
    if (this.buffer.length > INITIAL_CAPACITY) {
      this.buffer = new Float64Array(INITIAL_CAPACITY);
      this.mask = INITIAL_CAPACITY - 1;
    }
  }

  /** Copies the hits, in order, to the start of a new buffer of `capacity` (a power of two >= size). */
  private relayout(capacity: number): void {
    const next = new Float64Array(capacity);
    const firstPart = Math.min(this.size, this.buffer.length - this.head);
    next.set(this.buffer.subarray(this.head, this.head + firstPart), 0);
    next.set(this.buffer.subarray(0, this.size - firstPart), firstPart);
    this.buffer = next;
    this.mask = capacity - 1;
    this.head = 0;
  }
}

/** A key's state; the block and the window are the key's, shared by its throttlers, as in the default. */
interface KeyState {
  /** End of the key's fixed window (timeToExpire). */
  expiresAt: number;
  blockExpiresAt: number;
  isBlocked: boolean;
  /** The first throttler seen on the key and its hits: the only one when keys are per throttler, as the guard makes them. */
  throttlerName: string;
  hits: HitQueue;
  /** Any other throttler's hits on the same key. */
  otherHits?: Map<string, HitQueue>;
}

function otherHits(state: KeyState, throttlerName: string): HitQueue {
  state.otherHits ??= new Map();
  let hits = state.otherHits.get(throttlerName);
  if (hits === undefined) {
    hits = new HitQueue();
    state.otherHits.set(throttlerName, hits);
  }
  return hits;
}

/** The newest hit is the last to expire. */
function hasLiveHits(state: KeyState, now: number): boolean {
  if (state.hits.size > 0 && state.hits.newest > now) return true;
  for (const hits of state.otherHits?.values() ?? []) {
    if (hits.size > 0 && hits.newest > now) return true;
  }
  return false;
}
