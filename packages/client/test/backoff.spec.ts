import fc from 'fast-check';
import { backoffCap, backoffDelay, DEFAULT_RETRY_STATUSES, isRetryableStatus, parseRetryAfter } from '../src';

describe('backoffDelay', () => {
  it('keeps every sample within [0, min(maxDelayMs, baseDelayMs * 2^attempt)]', () => {
    for (let attempt = 0; attempt < 10; attempt++) {
      const cap = Math.min(8000, 200 * 2 ** attempt);
      const samples = Array.from({ length: 5_000 }, () => backoffDelay(attempt, 200, 8000));
      for (const delay of samples) {
        expect(Number.isInteger(delay)).toBe(true);
        expect(delay).toBeGreaterThanOrEqual(0);
        expect(delay).toBeLessThanOrEqual(cap);
      }
      // Full jitter: the samples spread over the whole range, not bunched near the cap.
      expect(Math.min(...samples)).toBeLessThan(cap * 0.1);
      expect(Math.max(...samples)).toBeGreaterThan(cap * 0.9);
    }
  });

  it('stays within bounds for any attempt, base, ceiling and random value', () => {
    fc.assert(
      fc.property(
        fc.nat(2_000),
        fc.nat(100_000),
        fc.nat(1_000_000),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (attempt, base, max, r) => {
          const delay = backoffDelay(attempt, base, max, () => r);
          expect(Number.isInteger(delay)).toBe(true);
          expect(delay).toBeGreaterThanOrEqual(0);
          expect(delay).toBeLessThanOrEqual(base === 0 ? 0 : Math.min(max, base * 2 ** attempt));
        },
      ),
    );
  });

  it('has a cap that doubles from baseDelayMs, then saturates at maxDelayMs', () => {
    const caps = Array.from({ length: 10 }, (_, attempt) => backoffCap(attempt, 200, 8000));
    expect(caps).toEqual([200, 400, 800, 1600, 3200, 6400, 8000, 8000, 8000, 8000]);
    expect(backoffCap(10_000, 200, 8000)).toBe(8000);
    expect(backoffCap(10_000, 0, 8000)).toBe(0);
  });

  it('reaches the cap at random() = 1 and 0 at random() = 0', () => {
    expect(Array.from({ length: 8 }, (_, attempt) => backoffDelay(attempt, 200, 8000, () => 1))).toEqual([
      200, 400, 800, 1600, 3200, 6400, 8000, 8000,
    ]);
    expect(backoffDelay(5, 200, 8000, () => 0)).toBe(0);
  });
});

describe('isRetryableStatus', () => {
  it.each([409, 429, 502, 503, 504])('retries %i by default', (status) => {
    expect(isRetryableStatus(status)).toBe(true);
  });

  it.each([200, 201, 400, 401, 402, 403, 404, 405, 413, 415, 422, 500, 501])('does not retry %i by default', (status) => {
    expect(isRetryableStatus(status)).toBe(false);
  });

  it('uses the configured set when given', () => {
    expect(isRetryableStatus(500, [500])).toBe(true);
    expect(isRetryableStatus(503, [500])).toBe(false);
    expect(DEFAULT_RETRY_STATUSES).toEqual([409, 429, 502, 503, 504]);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.UTC(2026, 0, 15, 12, 0, 0);

  it('reads delta-seconds as milliseconds', () => {
    expect(parseRetryAfter('0', now)).toBe(0);
    expect(parseRetryAfter('2', now)).toBe(2_000);
    expect(parseRetryAfter(' 120 ', now)).toBe(120_000);
  });

  it('reads an IMF-fixdate as the time until it', () => {
    expect(parseRetryAfter('Thu, 15 Jan 2026 12:00:30 GMT', now)).toBe(30_000);
  });

  it('reads the obsolete RFC 850 and asctime forms as UTC', () => {
    expect(parseRetryAfter('Thursday, 15-Jan-26 12:01:00 GMT', now)).toBe(60_000);
    expect(parseRetryAfter('Thu Jan 15 12:00:05 2026', now)).toBe(5_000);
    expect(parseRetryAfter('Thu Jan  1 00:00:00 2026', now)).toBe(0);
  });

  it('treats a date in the past as "retry now"', () => {
    expect(parseRetryAfter('Wed, 14 Jan 2026 12:00:00 GMT', now)).toBe(0);
  });

  it.each([null, undefined, '', 'soon', '-5', '-1', '1.5', '5s', '1e3', '0x10', 'Thu, 31 Feb 2026 12:00:00 GMT', 'Thu, 15 Jan 2026 25:00:00 GMT', '2026-01-15T12:00:30Z'])(
    'refuses %p',
    (value) => {
      expect(parseRetryAfter(value, now)).toBeUndefined();
    },
  );

  it('defaults now to the current time', () => {
    const inAMinute = new Date(Date.now() + 60_000).toUTCString();
    const delay = parseRetryAfter(inAMinute);
    expect(delay).toBeGreaterThan(55_000);
    expect(delay).toBeLessThanOrEqual(60_000);
  });
});
