import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import request from 'supertest';
import { idempotencyStoreOf } from 'safe-retries/testing';
import { DemoModule } from '../support/demo/widgets.module';
import { NOW_US, keyId } from '../support/keys-table';
import { LIBRARY_TABLE, LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from '../support/library-app';
import { MISSING_KEY_PROBLEM } from '../support/problems';
import { StalledRenewals } from '../support/stalled-renewals';
import { countRows } from '../support/test-services';
import { waitFor } from '../support/wait-for';

/**
 * Every path of the @Idempotent() request flow, through HTTP, on a real
 * PostgreSQL, on the demo routes of test/support/demo, in an app of the library
 * alone (Nest's own exception filter; the principal is the X-Principal header).
 */
const CLIENT_A = 'client-a';
const CLIENT_B = 'client-b';

describe('@Idempotent() (e2e)', () => {
  const KEYS = `"${LIBRARY_TABLE}"`;
  const registry = new Registry();
  let t: LibraryApp;
  const http = () => request(t.app.getHttpServer());
  const widgets = (where = 'true', params: unknown[] = []) => countRows(t.dataSource, 'demo_widgets', where, params);
  const keys = () => countRows(t.dataSource, KEYS);
  const post = (path: string, key: string | undefined, body: object, principal = CLIENT_A) => {
    const r = http().post(path).set(PRINCIPAL_HEADER, principal).send(body);
    return key === undefined ? r : r.set('Idempotency-Key', key);
  };

  /** The first request holds the key (in progress). */
  const claimed = (key: string) =>
    waitFor('the key to be claimed', async () => (await countRows(t.dataSource, KEYS, 'id = $1 AND status IS NULL', [keyId(CLIENT_A, key)])) === 1);
  /** Its lease has run out, by the database's clock. */
  const leaseExpired = (key: string) =>
    waitFor('the lease to expire', async () => (await countRows(t.dataSource, KEYS, `id = $1 AND lease <= ${NOW_US}`, [keyId(CLIENT_A, key)])) === 1);

  let renewals: StalledRenewals;
  beforeAll(async () => {
    t = await createLibraryApp('fastify', { imports: [DemoModule], idempotency: { registry } });
    renewals = new StalledRenewals(idempotencyStoreOf(t.app).store);
  });
  afterAll(() => t.close());

  it('runs the first request once and replays it byte for byte with Idempotent-Replayed', async () => {
    const key = randomUUID();
    const first = await post('/demo/widgets', key, { name: 'a' }).expect(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(first.headers['location']).toBe(`/demo/widgets/${first.body.id}`);

    const replay = await post('/demo/widgets', key, { name: 'a' }).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    expect(replay.headers['location']).toBe(first.headers['location']);
    expect(await widgets('name = $1', ['a'])).toBe(1);
  });

  it('treats a quoted sf-string key and the bare key as the same key', async () => {
    const key = `k-${randomUUID()}`;
    const first = await post('/demo/widgets', `"${key}"`, { name: 'quoted' }).expect(201);
    const bare = await post('/demo/widgets', key, { name: 'quoted' }).expect(201);
    expect(bare.headers['idempotent-replayed']).toBe('true');
    expect(bare.body.id).toBe(first.body.id);

    const escaped = 'with "quotes" and \\ backslash';
    const a = await post('/demo/widgets', `"${escaped.replace(/[\\"]/g, (c) => `\\${c}`)}"`, { name: 'esc' }).expect(201);
    const b = await post('/demo/widgets', escaped, { name: 'esc' }).expect(201);
    expect(b.body.id).toBe(a.body.id);
    expect(b.headers['idempotent-replayed']).toBe('true');
  });

  it('treats the same body with keys in another order as the same request', async () => {
    const key = randomUUID();
    const raw = (json: string) => http().post('/demo/widgets').set(PRINCIPAL_HEADER, CLIENT_A).set('Idempotency-Key', key).set('Content-Type', 'application/json').send(json);
    const first = await raw('{"name":"order","delay_ms":0}').expect(201);
    const again = await raw('{ "delay_ms": 0,\n "name": "order" }').expect(201);
    expect(again.body.id).toBe(first.body.id);
  });

  it.each([
    ['missing', undefined, 'idempotency_key_missing'],
    ['empty', '', 'idempotency_key_invalid'],
    ['empty quoted', '""', 'idempotency_key_invalid'],
    ['too long', 'x'.repeat(256), 'idempotency_key_invalid'],
    ['tab inside', 'a\tb', 'idempotency_key_invalid'],
    ['non-ASCII', 'clé', 'idempotency_key_invalid'],
    ['bad escape', '"a\\nb"', 'idempotency_key_invalid'],
    ['unterminated quote', '"abc', 'idempotency_key_invalid'],
  ])('answers 400 for a %s key and writes nothing', async (_name, key, code) => {
    const before = [await widgets(), await keys()];
    const res = await post('/demo/widgets', key, { name: 'bad-key' }).expect(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body.code).toBe(code);
    expect(res.body.type).toBe(`/docs/idempotency#${code}`);
    expect(res.headers['link']).toBe('</docs/idempotency>; rel="describedby"');
    expect([await widgets(), await keys()]).toEqual(before);
  });

  it('answers a missing key with the same problem bytes as the module alone', async () => {
    const res = await post('/demo/widgets', undefined, { name: 'bytes' }).expect(400);
    expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(res.text).toBe(MISSING_KEY_PROBLEM);
  });

  it('accepts a 255-character key', async () => {
    await post('/demo/widgets', 'k'.repeat(255), { name: 'long' }).expect(201);
  });

  it('answers 422 idempotency_key_reused for the same key with another body, path or query', async () => {
    const key = randomUUID();
    await post('/demo/widgets', key, { name: 'one' }).expect(201);
    const other = await post('/demo/widgets', key, { name: 'two' }).expect(422);
    expect(other.body.code).toBe('idempotency_key_reused');
    expect(other.text).not.toContain('one');
    expect((await post('/demo/optional', key, { name: 'one' }).expect(422)).body.code).toBe('idempotency_key_reused');
    expect((await post('/demo/widgets?x=1', key, { name: 'one' }).expect(422)).body.code).toBe('idempotency_key_reused');
    expect(await widgets('name = $1', ['two'])).toBe(0);
  });

  it('answers 409 with Retry-After while the first request is still running, then replays', async () => {
    const key = randomUUID();
    const slow = post('/demo/widgets', key, { name: 'slow', delay_ms: 1500 }).then((r) => r);
    await claimed(key);
    const dup = await post('/demo/widgets', key, { name: 'slow', delay_ms: 1500 }).expect(409);
    expect(dup.body.code).toBe('idempotency_request_in_progress');
    expect(Number(dup.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    const first = await slow;
    expect(first.status).toBe(201);
    const replay = await post('/demo/widgets', key, { name: 'slow', delay_ms: 1500 }).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.id).toBe(first.body.id);
    expect(await widgets('name = $1', ['slow'])).toBe(1);
  });

  it('renews the lease of a handler slower than it: a retry meanwhile gets 409, the handler commits once', async () => {
    const key = randomUUID();
    const body = { name: 'renewed', delay_ms: 1200 };
    const original = post('/demo/short-lease', key, body).then((r) => r);
    await claimed(key);
    const id = keyId(CLIENT_A, key);
    const [{ lease: first }] = await t.dataSource.query<{ lease: string }[]>(`SELECT lease::text AS lease FROM ${KEYS} WHERE id = $1`, [id]);
    // Past the lease the claim set (300 ms), by the database's clock: the renewed lease still runs.
    await waitFor('the first lease to pass', async () => (await countRows(t.dataSource, KEYS, `id = $1 AND $2::int8 < ${NOW_US}`, [id, first])) === 1);
    expect(await countRows(t.dataSource, KEYS, `id = $1 AND status IS NULL AND lease > ${NOW_US} AND lease > $2::int8`, [id, first])).toBe(1);
    const retry = await post('/demo/short-lease', key, body).expect(409);
    expect(retry.body.code).toBe('idempotency_request_in_progress');
    const done = await original;
    expect(done.status).toBe(201);
    expect(await widgets('name = $1', ['renewed'])).toBe(1);
    const replay = await post('/demo/short-lease', key, body).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.id).toBe(done.body.id);
  });

  it('lets a retry take over from a stalled owner after the lease; the stalled original loses its lease and rolls back', async () => {
    const key = randomUUID();
    const body = { name: 'lease', delay_ms: 1200 };
    renewals.stall(key);
    const original = post('/demo/short-lease', key, body).then((r) => r);
    await claimed(key);
    await leaseExpired(key); // lease is 300ms, the handler takes 1.2 s
    const takeover = await post('/demo/short-lease', key, { ...body }).expect(201);
    const lost = await original;
    expect(lost.status).toBe(409);
    expect(lost.body.code).toBe('idempotency_lease_lost');
    // Only the takeover's row committed: the original's insert rolled back.
    expect(await widgets('name = $1', ['lease'])).toBe(1);
    const replay = await post('/demo/short-lease', key, body).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.id).toBe(takeover.body.id);
  });

  it('stores a business outcome (402) with its writes and replays it as 402', async () => {
    const key = randomUUID();
    const first = await post('/demo/widgets', key, { name: 'declined', fail: 'declined' }).expect(402);
    expect(first.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(first.body.code).toBe('card_declined');
    const replay = await post('/demo/widgets', key, { name: 'declined', fail: 'declined' }).expect(402);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    expect(await widgets('name = $1', ['declined'])).toBe(1);
  });

  it('rolls back and releases the key on an unexpected error, so a retry runs again', async () => {
    const key = randomUUID();
    const failed = await post('/demo/widgets', key, { name: 'boom', fail: 'boom' }).expect(500);
    // The error reaches the app's exception filter (Nest's own here), as any other error.
    expect(failed.body).toEqual({ statusCode: 500, message: 'Internal server error' });
    expect(failed.text).not.toMatch(/demo: unexpected|at .*\.ts/);
    expect(await widgets('name = $1', ['boom'])).toBe(0);
    expect(await countRows(t.dataSource, KEYS, 'id = $1', [keyId(CLIENT_A, key)])).toBe(0);
    // The retry runs the handler again (no stored 500, no 409)...
    const retry = await post('/demo/widgets', key, { name: 'boom', fail: 'boom' }).expect(500);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    // ...and since nothing is held, the key is free for a corrected request.
    const fixed = await post('/demo/widgets', key, { name: 'boom' }).expect(201);
    expect(fixed.headers['idempotent-replayed']).toBeUndefined();
    expect(await widgets('name = $1', ['boom'])).toBe(1);
  });

  it('does not consume the key on a validation error', async () => {
    const key = randomUUID();
    const invalid = await post('/demo/widgets', key, { name: 42, extra: true }).expect(400);
    expect(invalid.body.code).toBe('validation_failed');
    expect([...invalid.body.fields].sort()).toEqual(['extra', 'name']);
    expect(await countRows(t.dataSource, KEYS, 'id = $1', [keyId(CLIENT_A, key)])).toBe(0);
    await post('/demo/widgets', key, { name: 'fixed' }).expect(201);
  });

  it('scopes keys per principal: the same key from two principals is two operations', async () => {
    const key = randomUUID();
    const a = await post('/demo/widgets', key, { name: 'scoped' }).expect(201);
    const b = await post('/demo/widgets', key, { name: 'scoped' }, CLIENT_B).expect(201);
    expect(b.headers['idempotent-replayed']).toBeUndefined();
    expect(b.body.id).not.toBe(a.body.id);
    expect(await widgets('name = $1', ['scoped'])).toBe(2);
  });

  it('runs a route with required: false unprotected when no key is sent', async () => {
    const one = await post('/demo/optional', undefined, { name: 'optional' }).expect(201);
    const two = await post('/demo/optional', undefined, { name: 'optional' }).expect(201);
    expect(two.body.id).not.toBe(one.body.id);
    expect(two.headers['idempotent-replayed']).toBeUndefined();
  });

  it('honours @HttpCode and a per-route fingerprint that ignores a changing field', async () => {
    const key = randomUUID();
    const first = await post('/demo/accepted', key, { name: 'fp', client_ts: 1 }).expect(202);
    const retry = await post('/demo/accepted', key, { name: 'fp', client_ts: 2 }).expect(202);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body.id).toBe(first.body.id);
    await post('/demo/accepted', key, { name: 'other', client_ts: 2 }).expect(422);
  });

  it("counts every outcome and the claim latency in the app's registry", async () => {
    const counters = async () => {
      const text = await registry.metrics();
      const count = (outcome: string) => Number(new RegExp(`idempotency_requests_total\\{outcome="${outcome}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
      const claims = Number(/idempotency_claim_duration_seconds_count (\d+)/.exec(text)?.[1] ?? 0);
      const fromMemory = Number(/idempotency_replay_cache_hits_total (\d+)/.exec(text)?.[1] ?? 0);
      return { count, claims, fromMemory };
    };
    const before = await counters();

    // One of each outcome, in this test alone.
    const key = randomUUID();
    await post('/demo/widgets', key, { name: 'm1' }).expect(201); // claimed
    await post('/demo/widgets', key, { name: 'm1' }).expect(201); // replayed
    await post('/demo/widgets', key, { name: 'm2' }).expect(422); // mismatch
    await post('/demo/widgets', randomUUID(), { name: 'm4', fail: 'boom' }).expect(500); // claimed, then released
    const slowKey = randomUUID();
    renewals.stall(slowKey);
    const original = post('/demo/short-lease', slowKey, { name: 'm3', delay_ms: 1200 }).then((r) => r);
    await claimed(slowKey);
    await post('/demo/short-lease', slowKey, { name: 'm3', delay_ms: 1200 }).expect(409); // in_progress
    await leaseExpired(slowKey);
    await post('/demo/short-lease', slowKey, { name: 'm3', delay_ms: 1200 }).expect(201); // taken_over
    expect((await original).status).toBe(409); // lease_lost

    const after = await counters();
    const expected: Record<string, number> = { claimed: 3, replayed: 1, mismatch: 1, released: 1, in_progress: 1, taken_over: 1, lease_lost: 1 };
    for (const [outcome, n] of Object.entries(expected)) {
      expect({ outcome, delta: after.count(outcome) - before.count(outcome) }).toEqual({ outcome, delta: n });
    }
    // Every request above reached the claim but the replay, answered from memory.
    expect(after.claims - before.claims).toBe(6);
    expect(after.fromMemory - before.fromMemory).toBe(1);
  });
});
