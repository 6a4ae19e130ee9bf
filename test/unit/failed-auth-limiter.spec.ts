import { AsyncLocalStorage } from 'node:async_hooks';
import { Logger } from '@nestjs/common';
import { FailedAuthLimiter, MAX_TRACKED_ADDRESSES } from '../../src/auth/failed-auth.limiter';
import { loadConfig } from '../../src/config/config';
import { failedAuthLimit } from '../support/config';

/**
 * The cadence of the limiter's log: the first failure after a quiet minute at
 * once (in its request's context), then one summary line a minute while
 * failures go on, none for a minute without any. (Jest's fake timers run
 * callbacks in the test's own context, so this does not show that the real
 * timer runs outside the request's: AsyncResource.bind in the limiter does.)
 */
describe('FailedAuthLimiter summary line', () => {
  const request = new AsyncLocalStorage<{ id: string }>();
  let limiter: FailedAuthLimiter;
  let lines: { msg: string; requestId?: string }[];

  beforeEach(() => {
    jest.useFakeTimers();
    lines = [];
    jest.spyOn(Logger.prototype, 'warn').mockImplementation((_fields: unknown, msg: unknown) => {
      lines.push({ msg: String(msg), requestId: request.getStore()?.id });
    });
    limiter = new FailedAuthLimiter(failedAuthLimit(2)(loadConfig({})));
  });
  afterEach(() => {
    limiter.onApplicationShutdown();
    jest.restoreAllMocks();
    jest.useRealTimers();
  });

  it('is written once a minute while failures go on, the first failure after a quiet minute at once', () => {
    request.run({ id: 'first' }, () => limiter.recordFailure('192.0.2.1'));
    request.run({ id: 'second' }, () => limiter.recordFailure('192.0.2.2'));
    expect(lines).toEqual([{ msg: expect.stringContaining('failed authentication'), requestId: 'first' }]);

    jest.advanceTimersByTime(60_000);
    expect(lines[1]).toEqual({ msg: expect.stringContaining('0 addresses blocked, 2 failures from 2 addresses'), requestId: undefined });

    request.run({ id: 'third' }, () => limiter.recordFailure('192.0.2.3'));
    request.run({ id: 'fourth' }, () => limiter.recordFailure('192.0.2.3'));
    jest.advanceTimersByTime(60_000);
    expect(lines).toHaveLength(3);
    expect(lines[2]).toEqual({ msg: expect.stringContaining('1 addresses blocked, 2 failures from 1 addresses'), requestId: undefined });

    // A minute with nothing: no line, and the next failure is warned at once again.
    jest.advanceTimersByTime(60_000);
    expect(lines).toHaveLength(3);
    request.run({ id: 'fifth' }, () => limiter.recordFailure('192.0.2.9'));
    expect(lines[3]).toEqual({ msg: expect.stringContaining('failed authentication'), requestId: 'fifth' });
  });
});

/**
 * What the limiter counts and for how long: an IPv6 address by its /64, a
 * block until the window of the address's first failure ends, and blocked
 * addresses kept apart from the capped LRU of the others.
 */
describe('FailedAuthLimiter budgets', () => {
  let limiter: FailedAuthLimiter;
  const fail = (address: string, times = 1) => {
    for (let i = 0; i < times; i++) limiter.recordFailure(address);
  };

  beforeEach(() => {
    jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    limiter = new FailedAuthLimiter(failedAuthLimit(3)(loadConfig({})));
  });
  afterEach(() => {
    limiter.onApplicationShutdown();
    jest.restoreAllMocks();
  });

  it('never forgets a blocked address to make room for 10,000 new ones, while the others stay capped', () => {
    fail('203.0.113.7', 3);
    fail('198.51.100.9', 2); // counted, not blocked
    expect(limiter.blockedFor('203.0.113.7')).toBeGreaterThan(59);

    for (let i = 0; i < MAX_TRACKED_ADDRESSES; i++) fail(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);

    expect(limiter.countedAddresses).toBe(MAX_TRACKED_ADDRESSES);
    // Still blocked (what is left of its minute depends on how long the 10,000 took).
    expect(limiter.blockedFor('203.0.113.7')).toBeGreaterThan(0);
    expect(limiter.blockedAddresses).toBe(1);
    // The address below its budget was the least recently seen: forgotten, its count starts again.
    fail('198.51.100.9');
    expect(limiter.blockedFor('198.51.100.9')).toBeUndefined();
  });

  it('counts every address of an IPv6 /64 as one, and another /64 apart', () => {
    fail('2001:db8:1:2::1');
    fail('2001:db8:1:2:ffff:ffff:ffff:fffe');
    fail('2001:db8:1:2:8000::42');
    expect(limiter.blockedFor('2001:db8:1:2::9')).toBeGreaterThan(0);
    expect(limiter.blockedFor('2001:db8:1:3::1')).toBeUndefined();
    // IPv4 addresses are each their own.
    fail('192.0.2.1', 2);
    fail('192.0.2.2');
    expect(limiter.blockedFor('192.0.2.1')).toBeUndefined();
    expect(limiter.blockedFor('192.0.2.2')).toBeUndefined();
  });

  it('blocks until the minute of the first failure ends, then counts afresh', () => {
    jest.useFakeTimers();
    try {
      limiter.onApplicationShutdown();
      limiter = new FailedAuthLimiter(failedAuthLimit(3)(loadConfig({})));
      fail('203.0.113.7');
      jest.advanceTimersByTime(40_000);
      fail('203.0.113.7', 2);
      expect(limiter.blockedFor('203.0.113.7')).toBeCloseTo(20, 0);
      jest.advanceTimersByTime(20_000);
      // The minute's summary swept it: blocked addresses leave with time alone, asked or not.
      expect(limiter.blockedAddresses).toBe(0);
      expect(limiter.blockedFor('203.0.113.7')).toBeUndefined();
      fail('203.0.113.7', 2);
      expect(limiter.blockedFor('203.0.113.7')).toBeUndefined();
    } finally {
      jest.useRealTimers();
    }
  });
});
