import { AsyncLocalStorage } from 'node:async_hooks';
import { Logger } from '@nestjs/common';
import type { ClientsService } from '../../src/auth/clients.service';
import { FailedAuthLimiter } from '../../src/auth/failed-auth.limiter';
import { loadConfig } from '../../src/config/config';

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
    // The lookup of keys is not reached: these requests carry none.
    limiter = new FailedAuthLimiter(loadConfig({ RATE_LIMIT_UNAUTHENTICATED: '2' }), {} as ClientsService);
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
