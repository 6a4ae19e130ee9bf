import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { IdempotencyKeys } from 'safe-retries';
import { RedisIdempotencyStore } from 'safe-retries/redis';
import { idempotencyStoreOf } from 'safe-retries/testing';
import { holdKey } from '../support/claim-window';
import { ContractModule, SEND_CONTENT_TYPE, SideEffects, StoreKind } from '../support/demo/contract.module';
import { LIBRARY_TABLE, LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from '../support/library-app';
import { TimedResponse, histogram, peakConcurrency, timed } from '../support/race';
import { StalledRenewals } from '../support/stalled-renewals';
import { hasRedis, redisUrl } from '../support/test-services';

/**
 * The contract of @Idempotent() over HTTP, on each store on a real server:
 * PostgreSQL (the run's database) and Redis (the run's redis-server, from the
 * repository's jest global setup). The stores' own contract (claims, fencing,
 * takeover, renewal, release, outcome, one winner of a race) is the kit of
 * `safe-retries/testing`, run by test/store-contract; here is what the
 * interceptor makes of it. The route's side effect is a counter of executions
 * outside any database (SideEffects), so what is counted is what a store let
 * run, whatever it stored. The replay cache is off: every replay is the store's.
 */
const RUNS = Number(process.env.RACE_RUNS ?? 3);
const CLIENT_A = 'client-a';
const CLIENT_B = 'client-b';
// The Redis half skips, with one line, where the run has no Redis (never under CI).
const STORES: StoreKind[] = hasRedis() ? ['postgres', 'redis'] : ['postgres'];
/**
 * Each store, and the PostgreSQL store's routes again with `commit: 'one'` (under
 * /contract/postgres-one); the PostgreSQL ones again on node-postgres clients that
 * pipeline (a unit's last write sent with its COMMIT).
 */
const VARIANTS: { route: string; store: StoreKind; commit?: 'one'; pipeline: boolean }[] = [
  ...STORES.map((store) => ({ route: store, store, pipeline: false })),
  { route: 'postgres-one', store: 'postgres', commit: 'one', pipeline: false },
  { route: 'postgres', store: 'postgres', pipeline: true },
  { route: 'postgres-one', store: 'postgres', commit: 'one', pipeline: true },
];

describe.each(VARIANTS)('idempotency contract, $route, pipelined clients: $pipeline (e2e)', ({ route, store, commit, pipeline }) => {
  // A leased owner's renewal and takeover are the durable claim's; a one-commit owner's lease
  // bounds its transaction instead (idempotency-one-commit.spec.ts).
  const leased = commit === 'one' ? it.skip : it;
  jest.setTimeout(120_000);
  let t: LibraryApp;
  let effects: SideEffects;
  let renewals: StalledRenewals;

  beforeAll(async () => {
    t = await createLibraryApp('fastify', {
      listen: true,
      pipeline,
      imports: [ContractModule.on(store, commit)],
      idempotency: { replayCache: { enabled: false }, ...(store === 'redis' ? { stores: { redis: new RedisIdempotencyStore({ url: redisUrl() }) } } : {}) },
    });
    effects = t.app.get(SideEffects);
    renewals = new StalledRenewals(idempotencyStoreOf(t.app, store).store);
  });
  afterAll(() => t?.close());

  type Body = { name: string; hold?: boolean; pace_ms?: number; fail?: 'boom' | 'declined' };
  const post = (path: 'sends' | 'short-lease', key: string, body: Body, principal = CLIENT_A) =>
    request(t.url!).post(`/contract/${route}/${path}`).set(PRINCIPAL_HEADER, principal).set('Idempotency-Key', key).send(body);
  const send = (path: 'sends' | 'short-lease', key: string, body: Body) => post(path, key, body).then((r) => r);
  const name = (what: string) => `${what}-${randomUUID()}`;

  /**
   * Sends the same request until one takes the key over from an owner whose
   * lease ran out (judged by the store's clock) and starts execution number
   * `execution`; returns that request, still running (wrapped: awaiting a
   * returned promise would wait for its answer). Each earlier one got 409.
   * The deadline only guards against a hang: 30 s, a hundred leases.
   */
  async function takeOver(key: string, body: Body, execution: number) {
    const started = effects.executionStarted(body.name, execution).then(() => 'started' as const);
    const deadline = Date.now() + 30_000;
    for (let tries = 1; ; tries++) {
      const attempt = send('short-lease', key, body);
      const first = await Promise.race([attempt, started]);
      if (first === 'started') return { response: attempt };
      expect(first.status).toBe(409);
      expect(first.body.code).toBe('idempotency_request_in_progress');
      if (Date.now() > deadline) {
        throw new Error(`no takeover within 30 s of a 300 ms lease: ${tries} tries, each 409 in progress (Retry-After ${first.headers['retry-after']})`);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  it('runs the first request once and replays status, body bytes, content type and Location', async () => {
    const key = randomUUID();
    const body = { name: name('fidelity') };
    const first = await post('sends', key, body).expect(202);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(first.headers['content-type']).toBe(SEND_CONTENT_TYPE);
    expect(first.headers['location']).toMatch(new RegExp(`^/contract/${route}/sends/`));

    const replay = await post('sends', key, body).expect(202);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(Buffer.from(replay.text)).toEqual(Buffer.from(first.text));
    expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    expect(replay.headers['location']).toBe(first.headers['location']);
    expect(effects.executions(body.name)).toBe(1);
  });

  it('answers 422 idempotency_key_reused for the same key with another body', async () => {
    const key = randomUUID();
    const body = { name: name('mismatch') };
    await post('sends', key, body).expect(202);
    const other = await post('sends', key, { name: name('other') }).expect(422);
    expect(other.body.code).toBe('idempotency_key_reused');
    expect(effects.executions(body.name)).toBe(1);
  });

  it('scopes keys per principal: the same key from two principals is two operations', async () => {
    const key = randomUUID();
    const body = { name: name('scope') };
    const a = await post('sends', key, body).expect(202);
    const b = await post('sends', key, body, CLIENT_B).expect(202);
    expect(b.headers['idempotent-replayed']).toBeUndefined();
    expect(b.text).not.toBe(a.text);
    expect(effects.executions(body.name)).toBe(2);
  });

  it('answers 409 with Retry-After while the first request runs, then replays it', async () => {
    const key = randomUUID();
    const body = { name: name('in-progress'), hold: true };
    const first = send('sends', key, body);
    await effects.executionStarted(body.name, 1);
    const dup = await post('sends', key, body).expect(409);
    expect(dup.body.code).toBe('idempotency_request_in_progress');
    expect(Number(dup.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    effects.release(body.name, 1);
    const done = await first;
    expect(done.status).toBe(202);
    const replay = await post('sends', key, body).expect(202);
    expect(replay.text).toBe(done.text);
    expect(effects.executions(body.name)).toBe(1);
  });

  it('stores a business outcome (402) and replays it', async () => {
    const key = randomUUID();
    const body = { name: name('declined'), fail: 'declined' as const };
    const first = await post('sends', key, body).expect(402);
    const replay = await post('sends', key, body).expect(402);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(effects.executions(body.name)).toBe(1);
  });

  it('releases the key on an unexpected error, so a retry runs again', async () => {
    const key = randomUUID();
    const body = { name: name('released'), hold: true };
    const first = send('sends', key, body);
    await effects.executionStarted(body.name, 1);
    effects.release(body.name, 1, 'fail');
    expect((await first).status).toBe(500);
    const retry = send('sends', key, body);
    await effects.executionStarted(body.name, 2);
    effects.release(body.name, 2);
    expect((await retry).status).toBe(202);
    expect(effects.executions(body.name)).toBe(2);
  });

  leased('renews the lease of an owner at work: retries long past the first lease get 409, then the one response', async () => {
    const key = randomUUID();
    const body = { name: name('renewed'), hold: true };
    const original = send('short-lease', key, body);
    await effects.executionStarted(body.name, 1);
    // Retries until the owner has kept its lease through 30 renewals, one every third of
    // it (ten leases): a lease that was not renewed would have been taken over by one of them.
    const deadline = Date.now() + 30_000;
    do {
      const retry = await send('short-lease', key, body);
      expect(retry.status).toBe(409);
      expect(retry.body.code).toBe('idempotency_request_in_progress');
      if (Date.now() > deadline) throw new Error(`only ${renewals.renewals(key)} renewals in 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    } while (renewals.renewals(key) < 30);
    effects.release(body.name, 1);
    const done = await original;
    expect(done.status).toBe(202);
    expect(effects.executions(body.name)).toBe(1);
    const replay = await post('short-lease', key, body).expect(202);
    expect(replay.text).toBe(done.text);
  });

  leased("lets a retry take over from a stalled owner after the lease; the stale owner's completion while the takeover runs fails, and the newer response stands", async () => {
    const key = randomUUID();
    const body = { name: name('stale-complete'), hold: true };
    renewals.stall(key);
    const original = send('short-lease', key, body);
    await effects.executionStarted(body.name, 1);
    const takeover = (await takeOver(key, body, 2)).response;

    // The stale owner completes first, while the takeover still runs: the key is
    // in progress (no response stored), so only the owner's token in the fenced
    // completion can refuse it.
    effects.release(body.name, 1);
    const stale = await original;
    expect(stale.status).toBe(409);
    expect(stale.body.code).toBe('idempotency_lease_lost');
    expect(effects.executions(body.name)).toBe(2);

    effects.release(body.name, 2);
    const newer = await takeover;
    expect(newer.status).toBe(202);
    expect(JSON.parse(newer.text)).toMatchObject({ execution: 2 });

    const replay = await post('short-lease', key, body).expect(202);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(newer.text);
  });

  leased("a stalled owner's release after a failure leaves the newer claim in place", async () => {
    const key = randomUUID();
    const body = { name: name('stale-release'), hold: true };
    renewals.stall(key);
    const original = send('short-lease', key, body);
    await effects.executionStarted(body.name, 1);
    const takeover = (await takeOver(key, body, 2)).response;

    effects.release(body.name, 1, 'fail');
    expect((await original).status).toBe(500);

    // Had the stale owner's release deleted the key, the newer owner's fenced
    // completion would find no claim of its own and answer 409 lease lost.
    effects.release(body.name, 2);
    const newer = await takeover;
    expect(newer.status).toBe(202);
    const replay = await post('short-lease', key, body).expect(202);
    expect(replay.text).toBe(newer.text);
    expect(effects.executions(body.name)).toBe(2);
  });

  it('tells where an operation stands by its key, running nothing: unknown, in progress, completed; scoped', async () => {
    const scope = CLIENT_A;
    const keys = t.app.get(IdempotencyKeys);
    const key = randomUUID();
    const body = { name: name('outcome'), hold: true };
    expect(await keys.outcome(scope, key)).toEqual({ key, state: 'unknown' });
    const running = send('sends', key, body);
    await effects.executionStarted(body.name, 1);
    expect(await keys.outcome(scope, key)).toEqual({ key, state: 'in_progress', retryAfterMs: expect.any(Number) });
    effects.release(body.name, 1);
    expect((await running).status).toBe(202);
    const done = await keys.outcome(scope, key);
    expect(done).toEqual({ key, state: 'completed', status: 202, expiresAt: expect.any(String) });
    if (done.state === 'completed') expect(Date.parse(done.expiresAt)).toBeGreaterThan(Date.now());
    expect(await keys.outcome(`${scope}-other`, key)).toEqual({ key, state: 'unknown' });
    expect(effects.executions(body.name)).toBe(1);
  });

  // The durable claim's races meet in its one window every run (test/support/claim-window.ts):
  // a claim that let two requests win would execute the route twice here.
  it.each([100])('race: %i identical concurrent requests execute once, every run', async (n) => {
    for (let run = 1; run <= RUNS; run++) {
      const key = randomUUID();
      const body = { name: name('race'), pace_ms: 50 };
      const held = store === 'postgres' && !commit ? await holdKey(t.db.url, key, [CLIENT_A], LIBRARY_TABLE) : undefined;
      const sent = Promise.all(Array.from({ length: n }, () => timed(post('sends', key, body))));
      let waited = '';
      try {
        if (held) waited = `, ${await held.claimsWaiting(2)} claims met in the window`;
      } finally {
        await held?.release();
      }
      const responses: TimedResponse[] = await sent;
      console.log(`${route} race N=${n} run ${run}/${RUNS}: ${JSON.stringify(histogram(responses))} peak in flight ${peakConcurrency(responses)}${waited}`);
      expect(effects.executions(body.name)).toBe(1);
      const originals = responses.filter((r) => r.status === 202 && r.headers['idempotent-replayed'] === undefined);
      expect(originals).toHaveLength(1);
      for (const r of responses) {
        expect([202, 409]).toContain(r.status);
        if (r.status === 202) expect(r.text).toBe(originals[0].text);
      }
      expect(peakConcurrency(responses)).toBeGreaterThanOrEqual(n / 2);
    }
  });
});
