import { Test } from '@nestjs/testing';
import { ThrottlerModule, ThrottlerStorageService, getStorageToken } from '@nestjs/throttler';
import type { ThrottlerStorage } from '@nestjs/throttler';
import fc from 'fast-check';
import { SlidingWindowThrottlerStorage } from '../../src/auth/throttler-storage';

/**
 * SlidingWindowThrottlerStorage must answer exactly what @nestjs/throttler's own storage
 * answers: both are driven by the same calls at the same (fake) clock readings and every
 * record must be equal, field by field (the guard turns them into X-RateLimit-* headers,
 * Retry-After and the 429). The default storage reads Date.now(), so the clock is Jest's.
 */

type StorageRecord = Awaited<ReturnType<ThrottlerStorage['increment']>>;

const T0 = Date.UTC(2026, 0, 1, 12);
const TTL = 1_000;
const NAME = 'client';

/** A request of a key, as the guard makes it (ttl and blockDuration default to the app's: 1 s, block = ttl). */
interface Call {
  key: string;
  limit: number;
  ttl?: number;
  blockDuration?: number;
  name?: string;
}
/**
 * A request, a wait (ms, Jest's timers run, the sweeps among them), the clock set back (ms,
 * as by NTP), or an explicit sweep of both at the current time.
 */
type Step = Call | { wait: number } | { back: number } | 'sweep';

/** The default storage's sweep, private in its typings. */
const sweepReference = (reference: ThrottlerStorageService, now: number) =>
  (reference as unknown as { evictIdleRecords(now: number): void }).evictIdleRecords(now);

class Pair {
  readonly reference = new ThrottlerStorageService();
  readonly ours = new SlidingWindowThrottlerStorage();

  /** Runs the steps on both; returns our records, after checking each against the reference's. */
  async run(steps: Step[]): Promise<StorageRecord[]> {
    const records: StorageRecord[] = [];
    for (const [i, step] of steps.entries()) {
      if (step === 'sweep') {
        sweepReference(this.reference, Date.now());
        this.ours.evictIdleKeys(Date.now());
        expect({ step: i, keys: this.ours.keyCount }).toEqual({ step: i, keys: this.reference.storage.size });
      } else if ('wait' in step) {
        jest.advanceTimersByTime(step.wait);
      } else if ('back' in step) {
        jest.setSystemTime(Date.now() - step.back);
      } else {
        const args = [step.key, step.ttl ?? TTL, step.limit, step.blockDuration ?? step.ttl ?? TTL, step.name ?? NAME] as const;
        const expected = await this.reference.increment(...args);
        const actual = await this.ours.increment(...args);
        // The step and the time in the message: fast-check shrinks a failure to its shortest sequence.
        expect({ step: i, at: Date.now() - T0, ...actual }).toEqual({ step: i, at: Date.now() - T0, ...expected });
        records.push(actual);
      }
    }
    expect(this.ours.keyCount).toBe(this.reference.storage.size);
    return records;
  }

  shutdown(): void {
    this.reference.onApplicationShutdown();
    this.ours.onApplicationShutdown();
  }
}

const calls = (n: number, call: Call): Call[] => Array.from({ length: n }, () => call);
const wait = (ms: number) => ({ wait: ms });
const blocked = (records: StorageRecord[]) => records.map((r) => r.isBlocked);

let pair: Pair;
beforeEach(() => {
  jest.useFakeTimers({ now: T0, doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
  pair = new Pair();
});
afterEach(() => {
  pair.shutdown();
  jest.useRealTimers();
});

describe('SlidingWindowThrottlerStorage against ThrottlerStorageService', () => {
  it('limit 1: the second request of the window is refused and blocks the key for the block duration (= ttl)', async () => {
    const a = { key: 'a', limit: 1 };
    const records = await pair.run([a, a, wait(500), a, wait(499), a, wait(1), a, a, wait(1_000), a]);
    expect(blocked(records)).toEqual([false, true, true, true, false, true, false]);
    // Retry-After: a second while blocked; the refused requests are not counted (totalHits stays 2).
    expect(records.map((r) => (r.isBlocked ? [r.totalHits, r.timeToBlockExpire] : r.totalHits))).toEqual([1, [2, 1], [2, 1], [2, 1], 1, [2, 1], 1]);
  });

  it('limit 3: bursts, and requests spread so that the sliding window (not a fixed one) decides', async () => {
    const a = { key: 'a', limit: 3 };
    const records = await pair.run([
      ...calls(5, a),
      wait(1_000), // the block ends with the window: the next request starts afresh
      a,
      wait(300),
      a,
      wait(300),
      a,
      wait(399), // 999 ms after the first of the three: a fourth is over the limit
      a,
      wait(1_001),
      a,
      wait(700),
      a,
      wait(299),
      a,
      wait(1), // the first of these three has expired: room for one
      a,
      a,
    ]);
    expect(blocked(records)).toEqual([false, false, false, true, true, false, false, false, true, false, false, false, false, true]);
  });

  it('timeToExpire is a fixed window per key, restarted by the first request after it ends (seconds, rounded up)', async () => {
    // With the app's ttl of 1 s it is always 1; a ttl of 3 s shows the window.
    const a = { key: 'a', limit: 100, ttl: 3_000 };
    const records = await pair.run([a, wait(1), a, wait(1_000), a, wait(1_000), a, wait(999), a, wait(1), a, wait(2_499), a]);
    expect(records.map((r) => r.timeToExpire)).toEqual([3, 3, 2, 1, 3, 3, 1]);
  });

  it('limit 100: a burst over the limit, then requests while blocked are not counted, and the count slides down', async () => {
    const a = { key: 'a', limit: 100 };
    const steps: Step[] = [];
    for (let i = 0; i < 150; i++) steps.push(a, wait(5)); // 100 pass in the first 500 ms, the 101st blocks
    for (let i = 0; i < 50; i++) steps.push(a, wait(20));
    const records = await pair.run(steps);
    // 100 in the first 500 ms; blocked from 500 to 1,500 ms; then the 12 requests from 1,510 ms.
    expect(records.filter((r) => !r.isBlocked)).toHaveLength(100 + 12);
    expect(Math.max(...records.map((r) => r.totalHits))).toBe(101);
  });

  it('a block longer than the window outlasts the hits: totalHits falls to 0 while Retry-After counts down', async () => {
    const a = { key: 'a', limit: 3, blockDuration: 5_000 };
    const steps: Step[] = [...calls(4, a)];
    for (let i = 0; i < 12; i++) steps.push(wait(450), a);
    const records = await pair.run(steps);
    expect(records.map((r) => (r.isBlocked ? `${r.totalHits}/${r.timeToBlockExpire}` : 'ok'))).toEqual([
      'ok',
      'ok',
      'ok',
      '4/5',
      '4/5',
      '4/5', // 900 ms: the hits are live until 1,000 ms
      '0/4',
      '0/4',
      '0/3',
      '0/3',
      '0/2',
      '0/2',
      '0/1',
      '0/1',
      '0/1', // 4,950 ms
      'ok', // 5,400 ms: the block is over
    ]);
  });

  it('a block shorter than the window: the first request after it starts afresh, forgetting the hits still live', async () => {
    const a = { key: 'a', limit: 3, blockDuration: 300 };
    const records = await pair.run([...calls(4, a), wait(299), a, wait(1), ...calls(4, a), wait(700), a]);
    expect(records.map((r) => (r.isBlocked ? 'blocked' : r.totalHits))).toEqual([1, 2, 3, 'blocked', 'blocked', 1, 2, 3, 'blocked', 1]);
  });

  it('keys are independent; two throttlers on one key share its block, as in the default', async () => {
    const a = { key: 'a', limit: 1 };
    const b = { key: 'b', limit: 3 };
    const c = { key: 'c', limit: 100, blockDuration: 2_000 };
    const aShort = { key: 'a', limit: 2, name: 'short' };
    const records = await pair.run([a, b, c, a, b, aShort, b, b, c, aShort, wait(1_000), aShort, a, a, aShort, wait(2_000), b, aShort, a]);
    expect(records.filter((r) => r.isBlocked)).not.toHaveLength(0);
  });

  it('blockDuration 0 (not blocking): a request over the limit is refused and not counted, as the default does', async () => {
    const a = { key: 'a', limit: 3, blockDuration: 0 };
    const records = await pair.run([...calls(5, a), wait(400), a, wait(600), a, a, a, a, wait(2_000), a]);
    expect(blocked(records)).toEqual([false, false, false, true, true, true, false, false, false, true, false]);
  });

  it('a ttl that changes between calls, and a clock set back, keep the hits in expiry order', async () => {
    const a = { key: 'a', limit: 4 };
    await pair.run([{ ...a, ttl: 3_000 }, { ...a, ttl: 500 }, { ...a, ttl: 2_000 }, wait(600), a, a, wait(1_500), a, a, a]);
    await pair.run([{ back: 1_500 }, a, a, a, wait(800), a, a, { ...a, ttl: 100 }, wait(3_000), a]);
    await pair.run([a, { back: 5_000 }, a, a, { ...a, ttl: 7_000 }, wait(1_000), a, { back: 500 }, a, wait(2_000), a]);
  });

  const call = (keys: { key: string; limit: number; blockDuration: number }[]) =>
    fc.constantFrom(...keys).map((k): Call => ({ key: k.key, limit: k.limit, blockDuration: k.blockDuration }));
  /** Rare: a ttl other than the app's (its block then equal to it), out of the expiry order. */
  const otherTtl = (keys: { key: string; limit: number; blockDuration: number }[]) =>
    fc.tuple(fc.constantFrom(...keys), fc.constantFrom(200, 1_500, 4_000)).map(([k, ttl]): Call => ({ key: k.key, limit: k.limit, ttl }));
  const waits = fc.oneof(
    fc.constant(0),
    fc.integer({ min: 1, max: 20 }),
    fc.integer({ min: 100, max: 1_000 }),
    fc.integer({ min: 990, max: 1_010 }),
    fc.integer({ min: 1, max: 6_000 }),
  );
  const limits = fc.constantFrom(1, 3, 100);
  const blockDurations = fc.constantFrom(TTL, 300, 2_500, 90_000);

  it('random sequences (keys of limits 1, 3 and 100, blocks of ttl, shorter and longer, bursts, waits, sweeps; rarely another ttl or the clock set back): the same records', async () => {
    const scenario = fc
      .array(fc.record({ limit: limits, blockDuration: blockDurations }), { minLength: 1, maxLength: 3 })
      .map((keys) => keys.map((k, i) => ({ ...k, key: `client:${i}` })))
      .chain((keys) =>
        fc.array(
          fc.oneof(
            { weight: 6, arbitrary: call(keys).map((c) => [c]) },
            { weight: 2, arbitrary: fc.tuple(call(keys), fc.integer({ min: 2, max: 130 })).map(([c, n]) => calls(n, c)) },
            { weight: 4, arbitrary: waits.map((ms) => [wait(ms)]) },
            { weight: 1, arbitrary: fc.constant(['sweep' as const]) },
            { weight: 1, arbitrary: otherTtl(keys).map((c) => [c]) },
            { weight: 1, arbitrary: fc.integer({ min: 1, max: 1_500 }).map((ms) => [{ back: ms }]) },
          ),
          { maxLength: 60 },
        ),
      )
      .map((chunks) => chunks.flat());
    await fc.assert(
      fc.asyncProperty(scenario, async (steps) => {
        pair.shutdown();
        jest.setSystemTime(T0);
        pair = new Pair();
        await pair.run(steps);
      }),
      { numRuns: 300 },
    );
  });
});

describe('SlidingWindowThrottlerStorage: memory', () => {
  it('the periodic sweep (every 60 s) drops the keys idle for a window, keeps those blocked or with live hits', async () => {
    const ours = pair.ours;
    const steps: Step[] = [];
    for (let i = 0; i < 1_000; i++) steps.push({ key: `client:${i}`, limit: 100 });
    await pair.run([...steps, ...calls(2, { key: 'blocked', limit: 1, blockDuration: 90_000 })]);
    expect(ours.keyCount).toBe(1_001);

    await pair.run([wait(59_500), { key: 'recent', limit: 100 }, wait(499)]);
    expect(ours.keyCount).toBe(1_002);
    await pair.run([wait(1)]); // 60 s: the first sweep
    expect(ours.keyCount).toBe(2);

    await pair.run([wait(60_000)]); // 120 s: the block and the recent hit are over
    expect(ours.keyCount).toBe(0);
    // A key seen again after its eviction gets what the default (which evicted it too) answers.
    await pair.run([...calls(3, { key: 'blocked', limit: 1, blockDuration: 90_000 })]);
  });

  it('never stores a refused request: a flood holds at most limit + 1 hits, and the count is what the guard reads', async () => {
    const records = await pair.run([...calls(10_000, { key: 'a', limit: 3 }), wait(999), { key: 'a', limit: 3 }]);
    expect(Math.max(...records.map((r) => r.totalHits))).toBe(4);
    expect(records.at(-1)).toMatchObject({ isBlocked: true, totalHits: 4 });
  });

  it('the sweep is one timer, started by the first request and stopped on application shutdown', async () => {
    const ours = new SlidingWindowThrottlerStorage();
    pair.shutdown();
    expect(jest.getTimerCount()).toBe(0);
    await ours.increment('a', TTL, 1, TTL, NAME);
    await ours.increment('b', TTL, 1, TTL, NAME);
    expect(jest.getTimerCount()).toBe(1);
    ours.onApplicationShutdown();
    expect(jest.getTimerCount()).toBe(0);
    expect(ours.keyCount).toBe(0);
  });

  it('an injected clock drives the window and the eviction', async () => {
    let now = 1_000_000;
    const ours = new SlidingWindowThrottlerStorage({ now: () => now, sweepIntervalMs: 10_000 });
    try {
      expect(await ours.increment('a', TTL, 1, TTL, NAME)).toMatchObject({ totalHits: 1, isBlocked: false, timeToExpire: 1 });
      expect(await ours.increment('a', TTL, 1, TTL, NAME)).toMatchObject({ totalHits: 2, isBlocked: true, timeToBlockExpire: 1 });
      now += TTL;
      expect(await ours.increment('a', TTL, 1, TTL, NAME)).toMatchObject({ totalHits: 1, isBlocked: false });
      ours.evictIdleKeys();
      expect(ours.keyCount).toBe(1);
      now += TTL;
      ours.evictIdleKeys();
      expect(ours.keyCount).toBe(0);
    } finally {
      ours.onApplicationShutdown();
    }
  });

  it("given as ThrottlerModule's storage, it is the storage the guard gets, and Nest's shutdown stops its sweep", async () => {
    pair.shutdown();
    const storage = new SlidingWindowThrottlerStorage();
    const moduleRef = await Test.createTestingModule({
      imports: [ThrottlerModule.forRootAsync({ useFactory: () => ({ throttlers: [{ name: NAME, ttl: TTL, limit: 1 }], storage }) })],
    }).compile();
    await moduleRef.init();
    expect(moduleRef.get(getStorageToken())).toBe(storage);
    await storage.increment('a', TTL, 1, TTL, NAME);
    expect(jest.getTimerCount()).toBe(1);
    await moduleRef.close();
    expect(jest.getTimerCount()).toBe(0);
  });
});
