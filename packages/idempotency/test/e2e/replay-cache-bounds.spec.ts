import { randomUUID } from 'node:crypto';
import { Body, Controller, Module, Post } from '@nestjs/common';
import request from 'supertest';
import { Idempotent } from 'safe-retries';
import { keyId } from '../support/keys-table';
import { LIBRARY_TABLE, LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from '../support/library-app';

/**
 * The replay cache's bounds, through HTTP on a real PostgreSQL: how long an
 * entry is served, on the process's clock (performance.now, a fake one here:
 * jest moves it, nothing else), and how much the cache holds
 * (`replayCache.maxBytes`). The probe, as in replay-cache.spec.ts: the stored
 * body is changed behind the app's back, so a replay that still answers the
 * original bytes was answered from memory.
 */

/** The fake clock, moved by the handler between the claim and the store (`advance`, ms). */
const advance = (ms = 0) => jest.advanceTimersByTime(ms);
/** Every response of /cache/sized has the same size, whatever its key. */
const PAD = 'x'.repeat(1_000);

@Controller('cache')
class CacheProbeController {
  /** Kept for 10 s; the clock moves `advance` ms while it runs. */
  @Post('retained')
  @Idempotent({ lease: '5s', retention: '10s' })
  retained(@Body() body: { advance?: number }) {
    advance(body.advance);
    return { ran: randomUUID() };
  }

  /** Kept a day (the module's default); the clock moves `advance` ms while it runs. */
  @Post('sized')
  @Idempotent()
  sized(@Body() body: { advance?: number }) {
    advance(body.advance);
    return { pad: PAD };
  }

  /** Larger than the cache of this test. */
  @Post('large')
  @Idempotent()
  large() {
    return { pad: PAD.repeat(10) };
  }
}

@Module({ controllers: [CacheProbeController] })
class CacheProbeModule {}

describe('replays from memory: how long and how many (e2e)', () => {
  const PRINCIPAL = 'client-a';
  const KEYS = `"${LIBRARY_TABLE}"`;
  /** Room for a few /cache/sized responses (each a little over 2 KB), not for five. */
  const MAX_BYTES = 8_000;
  let t: LibraryApp;
  let uncached: LibraryApp;

  const post = (app: LibraryApp, path: string, key: string, body: object = {}, principal = PRINCIPAL) =>
    request(app.app.getHttpServer()).post(path).set(PRINCIPAL_HEADER, principal).set('Idempotency-Key', key).send(body);
  const tamper = (...keys: string[]) =>
    t.dataSource.query(`UPDATE ${KEYS} SET body = '{"tampered":true}' WHERE id = ANY($1) AND status IS NOT NULL`, [keys.map((key) => keyId(PRINCIPAL, key))]);
  /** Whether a replay of `key` (already tampered with) was answered from memory. */
  const fromMemory = async (path: string, key: string, body: object = {}) => {
    const replay = await post(t, path, key, body).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    return replay.text !== '{"tampered":true}';
  };

  beforeAll(async () => {
    t = await createLibraryApp('fastify', { imports: [CacheProbeModule], idempotency: { replayCache: { maxBytes: MAX_BYTES } } });
    uncached = await createLibraryApp('fastify', { imports: [CacheProbeModule], database: t.db, idempotency: { replayCache: { maxBytes: 0 } } });
    // The process's clock only (what the cache and the claim's start read): every timer stays real.
    jest.useFakeTimers({ doNotFake: ['Date', 'hrtime', 'nextTick', 'queueMicrotask', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval', 'setTimeout', 'clearTimeout'] });
  });
  afterAll(async () => {
    jest.useRealTimers();
    await uncached?.close();
    await t?.close();
  });

  it('answers the same scope, key and body, and nothing else', async () => {
    const key = randomUUID();
    const first = await post(t, '/cache/retained', key).expect(201);
    await tamper(key);
    expect(await fromMemory('/cache/retained', key)).toBe(true);
    // Another body: the claim answers 422.
    expect((await post(t, '/cache/retained', key, { advance: 0, other: true }).expect(422)).body.code).toBe('idempotency_key_reused');
    // Keys are scoped: another client's same key is its own request.
    const other = await post(t, '/cache/retained', key, {}, 'client-b').expect(201);
    expect(other.headers['idempotent-replayed']).toBeUndefined();
    expect(other.body.ran).not.toBe(first.body.ran);
    // Another key of the same client is another request.
    expect((await post(t, '/cache/retained', randomUUID()).expect(201)).headers['idempotent-replayed']).toBeUndefined();
  });

  it("serves an entry only until its key's retention ends, counted from when the claim was sent", async () => {
    const start = performance.now();
    // The claim goes out at `start`; the handler takes 4 s of the clock: 6 s of the 10 are left when it is stored.
    const key = randomUUID();
    await post(t, '/cache/retained', key, { advance: 4_000 }).expect(201);
    await tamper(key);
    advance(start + 9_000 - performance.now());
    expect(await fromMemory('/cache/retained', key, { advance: 4_000 })).toBe(true);
    advance(start + 10_000 - performance.now());
    expect(await fromMemory('/cache/retained', key, { advance: 4_000 })).toBe(false);
    // Already over when it is stored (the handler took longer than the retention): not kept at all.
    const late = randomUUID();
    await post(t, '/cache/retained', late, { advance: 11_000 }).expect(201);
    await tamper(late);
    expect(await fromMemory('/cache/retained', late, { advance: 11_000 })).toBe(false);
  });

  it('asks the database again after a minute however long the retention (docs/operations.md)', async () => {
    const key = randomUUID();
    await post(t, '/cache/sized', key).expect(201);
    await tamper(key);
    advance(59_999);
    expect(await fromMemory('/cache/sized', key)).toBe(true);
    advance(1);
    expect(await fromMemory('/cache/sized', key)).toBe(false);
    // Less than a millisecond of its minute left when it is stored: not kept (nor kept for ever).
    const last = randomUUID();
    await post(t, '/cache/sized', last, { advance: 59_999.5 }).expect(201);
    await tamper(last);
    expect(await fromMemory('/cache/sized', last, { advance: 59_999.5 })).toBe(false);
  });

  it('stays within maxBytes, dropping the least recently used first', async () => {
    advance(60_000); // the entries of the cases before are past their minute
    const keys = Array.from({ length: 5 }, () => randomUUID());
    for (const key of keys) await post(t, '/cache/sized', key).expect(201);
    await tamper(...keys);
    // Newest first: the entries kept are the newest ones, more than one and fewer than five.
    const answered: boolean[] = [];
    for (const key of [...keys].reverse()) answered.push(await fromMemory('/cache/sized', key));
    const kept = answered.filter(Boolean).length;
    expect(kept).toBeGreaterThan(1);
    expect(kept).toBeLessThan(5);
    expect(answered).toEqual([...Array<boolean>(kept).fill(true), ...Array<boolean>(5 - kept).fill(false)]);

    // Five more fill it again; reading the oldest kept makes it the most recent, so the next one in goes before it.
    const more = Array.from({ length: 6 }, () => randomUUID());
    for (const key of more.slice(0, 5)) await post(t, '/cache/sized', key).expect(201);
    await tamper(...more.slice(0, 5));
    const first = 5 - kept;
    expect(await fromMemory('/cache/sized', more[first])).toBe(true);
    await post(t, '/cache/sized', more[5]).expect(201);
    expect(await fromMemory('/cache/sized', more[first])).toBe(true);
    expect(await fromMemory('/cache/sized', more[first + 1])).toBe(false);
  });

  it('keeps nothing with maxBytes 0, nor a response larger than maxBytes (and drops nothing for it)', async () => {
    const key = randomUUID();
    await post(uncached, '/cache/sized', key).expect(201);
    await tamper(key);
    expect((await post(uncached, '/cache/sized', key).expect(201)).text).toBe('{"tampered":true}');

    advance(60_000);
    const small = randomUUID();
    await post(t, '/cache/sized', small).expect(201);
    const big = randomUUID();
    await post(t, '/cache/large', big).expect(201);
    await tamper(small, big);
    expect(await fromMemory('/cache/large', big)).toBe(false);
    expect(await fromMemory('/cache/sized', small)).toBe(true);
  });
});
