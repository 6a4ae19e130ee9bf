import { REPLAY_CACHE_MAX_AGE_MS, ReplayCache } from '../../src/core/replay-cache';
import { StoredResponse } from 'safe-retries/testing';

const FP = Buffer.alloc(16, 1);
const OTHER_FP = Buffer.alloc(16, 2);

function response(body: string): StoredResponse {
  return { status: 201, body, contentType: 'application/json; charset=utf-8', location: '/orders/1' };
}

describe('ReplayCache', () => {
  let now: number;
  const cache = (maxBytes = 1024 * 1024) => new ReplayCache(maxBytes, () => now);

  beforeEach(() => (now = 1_000));

  it('answers the same scope, key and fingerprint, and nothing else', () => {
    const c = cache();
    c.remember('client-a', 'k1', FP, response('{"id":1}'), 60_000, now);
    expect(c.get('client-a', 'k1', FP)).toEqual(response('{"id":1}'));
    expect(c.get('client-a', 'k1', OTHER_FP)).toBeUndefined(); // another body: the claim answers 422
    expect(c.get('client-b', 'k1', FP)).toBeUndefined(); // keys are scoped
    expect(c.get('client-a', 'k2', FP)).toBeUndefined();
  });

  it("serves an entry only until its key's retention ends, counted from when the claim was sent", () => {
    const c = cache();
    // The claim went out at 1,000; the database said 5 s are left.
    now = 1_400;
    c.remember('s', 'k', FP, response('{}'), 5_000, 1_000);
    now = 5_999;
    expect(c.get('s', 'k', FP)).toBeDefined();
    now = 6_000;
    expect(c.get('s', 'k', FP)).toBeUndefined();
    expect(c.size.entries).toBe(0); // dropped, not just skipped
    // Already over when it is remembered: not kept at all.
    c.remember('s', 'late', FP, response('{}'), 100, 1_000);
    expect(c.size.entries).toBe(0);
    // A retention the store could not tell is no retention, not an entry that never ends.
    c.remember('s', 'unknown', FP, response('{}'), Number.NaN, now);
    expect(c.size.entries).toBe(0);
  });

  it('asks the database again after REPLAY_CACHE_MAX_AGE_MS however long the retention', () => {
    const c = cache();
    c.remember('s', 'k', FP, response('{}'), 24 * 3_600_000, now);
    now += REPLAY_CACHE_MAX_AGE_MS - 1;
    expect(c.get('s', 'k', FP)).toBeDefined();
    now += 1;
    expect(c.get('s', 'k', FP)).toBeUndefined();
  });

  it('stays within maxBytes, dropping the least recently used first', () => {
    const body = 'x'.repeat(300);
    const c = cache(4_000);
    for (let i = 0; i < 5; i++) c.remember('s', `k${i}`, FP, response(body), 60_000, now);
    expect(c.size.bytes).toBeLessThanOrEqual(4_000);
    const kept = c.size.entries;
    expect(kept).toBeGreaterThan(1);
    expect(kept).toBeLessThan(5);
    // The oldest went; reading k(5-kept) makes it the most recent, so the next one in goes before it.
    const first = 5 - kept;
    expect(c.get('s', `k${first - 1}`, FP)).toBeUndefined();
    expect(c.get('s', `k${first}`, FP)).toBeDefined();
    c.remember('s', 'k5', FP, response(body), 60_000, now);
    expect(c.get('s', `k${first}`, FP)).toBeDefined();
    expect(c.get('s', `k${first + 1}`, FP)).toBeUndefined();
    expect(c.size.bytes).toBeLessThanOrEqual(4_000);
  });

  it('replaces an entry in place and keeps its byte count right', () => {
    const c = cache();
    c.remember('s', 'k', FP, response('a'.repeat(100)), 60_000, now);
    const one = c.size.bytes;
    c.remember('s', 'k', FP, response('a'.repeat(100)), 60_000, now);
    expect(c.size).toEqual({ entries: 1, bytes: one });
    c.clear();
    expect(c.size).toEqual({ entries: 0, bytes: 0 });
  });

  it('keeps nothing with maxBytes 0, nor a response larger than maxBytes', () => {
    const off = cache(0);
    off.remember('s', 'k', FP, response('{}'), 60_000, now);
    expect(off.get('s', 'k', FP)).toBeUndefined();
    const small = cache(1_000);
    small.remember('s', 'big', FP, response('x'.repeat(1_000)), 60_000, now);
    expect(small.size.entries).toBe(0);
  });
});
