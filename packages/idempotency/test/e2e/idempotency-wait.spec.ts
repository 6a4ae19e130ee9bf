import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { Registry } from 'prom-client';
import { startPostgres } from '@safe-retries/dev-postgres';
import request from 'supertest';
import { DemoModule } from '../support/demo/widgets.module';
import { keyId } from '../support/keys-table';
import { LIBRARY_TABLE, LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from '../support/library-app';
import { histogram, timed } from '../support/race';
import { lockTableWrites } from '../support/table-lock';
import { countRows } from '../support/test-services';
import { waitFor } from '../support/wait-for';

/**
 * `@Idempotent({ wait })`: a duplicate of a request in progress waits for the
 * owner (woken by LISTEN/NOTIFY when the key settles) and gets the replay; past
 * its wait it gets the usual 409 with Retry-After.
 *
 * The owner is held in its handler by a lock on demo_widgets (its INSERT waits)
 * for as long as each test needs, and a waiter is known to wait by its claims
 * (idempotency_claim_duration_seconds, in the app's registry): it asks, finds
 * the key in progress, subscribes to the key's settlement and asks once more
 * before it sleeps.
 */
describe('@Idempotent({ wait }) (e2e)', () => {
  const PRINCIPAL = 'client-a';
  const registry = new Registry();
  let t: LibraryApp;
  const postTo = (app: LibraryApp, path: string, key: string, body: object) =>
    request(app.url!).post(path).set(PRINCIPAL_HEADER, PRINCIPAL).set('Idempotency-Key', key).send(body);
  const post = (path: string, key: string, body: object) => postTo(t, path, key, body);
  const inProgress = async (key: string) => (await countRows(t.dataSource, `"${LIBRARY_TABLE}"`, 'id = $1 AND status IS NULL', [keyId(PRINCIPAL, key)])) === 1;
  const claimed = (key: string) => waitFor('the key to be claimed', () => inProgress(key));
  /** Claims made so far by the app of `of` (the owner's one, and a waiter's two or more). */
  const claimsIn = async (of: Registry) => {
    const { values } = await of.getSingleMetric('idempotency_claim_duration_seconds')!.get();
    return values.find((v) => (v as { metricName?: string }).metricName === 'idempotency_claim_duration_seconds_count')?.value ?? 0;
  };
  const claims = () => claimsIn(registry);
  const holdOwner = () => lockTableWrites(t.db.url, 'demo_widgets');

  beforeAll(async () => {
    t = await createLibraryApp('fastify', { imports: [DemoModule], idempotency: { registry }, listen: true });
  });
  afterAll(() => t.close());

  it('answers a duplicate that arrives while the first runs with the replay, once the first has committed', async () => {
    const key = randomUUID();
    const body = { name: 'wait-replay' };
    const events: string[] = [];
    const lock = await holdOwner();
    let first: Promise<request.Response>;
    let dup: Promise<request.Response>;
    try {
      const before = await claims();
      first = post('/demo/waiting', key, body).then((r) => (events.push('original answered'), r));
      await claimed(key);
      dup = post('/demo/waiting', key, body).then((r) => (events.push('duplicate answered'), r));
      await waitFor('the duplicate to wait for the owner', async () => (await claims()) >= before + 3);
      expect(events).toEqual([]);
    } finally {
      events.push('owner let go');
      await lock.release();
    }
    const [original, replay] = await Promise.all([first, dup]);
    expect(events[0]).toBe('owner let go');
    expect(original.status).toBe(201);
    expect(original.headers['idempotent-replayed']).toBeUndefined();
    // The replay exists only once the owner's response is committed.
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(original.text);
    expect(await countRows(t.dataSource, 'demo_widgets', 'name = $1', ['wait-replay'])).toBe(1);
  });

  it('still answers 409 with Retry-After when the wait is up first', async () => {
    const key = randomUUID();
    const body = { name: 'wait-timeout' };
    const lock = await holdOwner();
    let first: Promise<request.Response> | undefined;
    try {
      const before = await claims();
      first = post('/demo/short-wait', key, body).then((r) => r);
      await claimed(key);
      const dup = await timed(post('/demo/short-wait', key, body));
      expect(dup.status).toBe(409);
      expect(dup.json<{ code: string }>().code).toBe('idempotency_request_in_progress');
      expect(dup.headers['retry-after']).toMatch(/^\d+$/);
      // It waited (asked, subscribed, asked again) for the route's 300 ms, a floor no machine
      // undercuts, and was answered while the owner was still held: the wait ran out first.
      expect(await claims()).toBeGreaterThanOrEqual(before + 3);
      expect(dup.ended - dup.started).toBeGreaterThanOrEqual(300);
      expect(await inProgress(key)).toBe(true);
    } finally {
      await lock.release();
    }
    expect((await first!).status).toBe(201);
  });

  it('a pile-up of 99 duplicates answers with 99 replays', async () => {
    const key = randomUUID();
    const body = { name: 'wait-pileup' };
    const lock = await holdOwner();
    let answers: ReturnType<typeof timed>[];
    try {
      const before = await claims();
      answers = Array.from({ length: 100 }, () => timed(post('/demo/waiting', key, body)));
      // All 99 are waiting before the owner may finish: one claim of the owner's, two or more of each duplicate's.
      await waitFor('the 99 duplicates to wait for the owner', async () => (await claims()) >= before + 1 + 2 * 99);
      expect(await inProgress(key)).toBe(true);
    } finally {
      await lock.release();
    }
    const answered = await Promise.all(answers);
    console.log(`wait pile-up: ${JSON.stringify(histogram(answered))}`);
    expect(histogram(answered)).toEqual({ '201': 1, '201 replay': 99 });
    expect(new Set(answered.map((a) => a.json<{ id: string }>().id)).size).toBe(1);
    expect(await countRows(t.dataSource, 'demo_widgets', 'name = $1', ['wait-pileup'])).toBe(1);
  });
  it('with a listener that cannot LISTEN (a standby): waiters ask again each second, one attempt to listen a second, no session kept', async () => {
    const cluster = await startPostgres({ replica: {} });
    // Watched from another database: its own session is not one of the counted.
    const standby = new Client({ connectionString: cluster.replica!.url('template1') });
    const deafRegistry = new Registry();
    const deaf = await createLibraryApp('fastify', { imports: [DemoModule], idempotency: { registry: deafRegistry, postgres: { listenUrl: cluster.replica!.url('postgres') } }, listen: true });
    try {
      await standby.connect();
      const sessions = async () => (await standby.query<{ n: number }>("SELECT sessions::int AS n FROM pg_stat_database WHERE datname = 'postgres'")).rows[0].n;
      const open = async () => (await standby.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'safe-retries-waits'")).rows[0].n;
      const key = randomUUID();
      const send = () => postTo(deaf, '/demo/waiting', key, { name: 'wait-deaf' });
      const sessionsBefore = await sessions();
      const started = performance.now();
      const lock = await lockTableWrites(deaf.db.url, 'demo_widgets');
      let answers: ReturnType<typeof timed>[];
      try {
        const before = await claimsIn(deafRegistry);
        // Spread over a second, so that their asks again do not fall together.
        answers = [];
        for (let i = 0; i < 21; i++) {
          answers.push(timed(send()));
          await new Promise((r) => setTimeout(r, 50));
        }
        await waitFor('the 20 duplicates to wait for the owner', async () => (await claimsIn(deafRegistry)) >= before + 1 + 2 * 20);
        await new Promise((r) => setTimeout(r, 2_000)); // each waiter asks again every second meanwhile
      } finally {
        await lock.release();
      }
      const answered = await Promise.all(answers);
      expect(histogram(answered)).toEqual({ '201': 1, '201 replay': 20 });
      // Each attempt to listen is a session of the standby's, refused at LISTEN and closed (a sample may meet one being closed).
      const left: number[] = [];
      for (let i = 0; i < 5; i++) {
        left.push(await open());
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(Math.min(...left)).toBe(0);
      const seconds = (performance.now() - started) / 1_000;
      const attempts = (await sessions()) - sessionsBefore;
      console.log(`a deaf listener: ${attempts} attempts to listen in ${seconds.toFixed(1)} s, 20 waiters`);
      expect(attempts).toBeGreaterThanOrEqual(1);
      expect(attempts).toBeLessThanOrEqual(Math.ceil(seconds) + 1);
    } finally {
      await standby.end().catch(() => undefined);
      await deaf.close();
      await cluster.destroy();
    }
  });
});
