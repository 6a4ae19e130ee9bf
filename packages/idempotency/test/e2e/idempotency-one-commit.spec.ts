import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { IdempotencyKeys } from 'safe-retries';
import { LIBRARY_TABLE, LibraryApp, PRINCIPAL_HEADER, WidgetGates, createLibraryApp } from '../support/library-app';
import { countRows } from '../support/test-services';
import { waitFor } from '../support/wait-for';
import { PgCountingProxy, PgCounts, startPgCountingProxy } from '../support/pg-counting-proxy';

/**
 * `@Idempotent({ commit: 'one' })` over HTTP, on a real server: the key is
 * claimed inside the handler's transaction and written with its response at
 * its commit. The route writes a row (lib_widgets) in that transaction, so
 * what committed is what is counted. The replay cache is off: every replay is
 * read from the key's row. The app reaches PostgreSQL through a proxy that
 * counts, from the server's answers, the statements and commits of each
 * request (test/support/pg-counting-proxy.ts).
 */
describe.each([
  ['express', false],
  ['fastify', false],
  ['express', true],
  ['fastify', true],
] as const)('one commit per new key, on %s, pipelined clients: %s (e2e)', (platform, pipeline) => {
  jest.setTimeout(60_000);
  const KEYS = `"${LIBRARY_TABLE}"`;
  const SCOPE = 'acct_one';
  let t: LibraryApp;
  let proxy: PgCountingProxy;

  const post = (path: 'widgets' | 'widgets-one' | 'widgets-one-wait', key: string, body: object) =>
    request(t.app.getHttpServer()).post(`/lib/${path}`).set(PRINCIPAL_HEADER, SCOPE).set('Idempotency-Key', key).send(body);
  const widgets = (name: string) => countRows(t.dataSource, 'lib_widgets', 'name = $1', [name]);
  const outcome = (key: string) => t.app.get(IdempotencyKeys).outcome(SCOPE, key);

  beforeAll(async () => {
    const admin = new URL(process.env.TEST_ADMIN_DATABASE_URL!);
    proxy = await startPgCountingProxy({ host: admin.hostname, port: Number(admin.port) });
    t = await createLibraryApp(platform, { databaseUrl: (url) => proxy.url(url), idempotency: { replayCache: { enabled: false } }, pipeline });
  });
  afterAll(async () => {
    await t?.close();
    await proxy?.close();
  });

  it('runs a new key once, replays it byte for byte from its row, answers 422 to another body', async () => {
    const key = randomUUID();
    const name = `one-${key}`;
    const first = await post('widgets-one', key, { name }).expect(201);
    expect(first.headers['location']).toBe(`/lib/widgets/${first.body.id}`);
    const replay = await post('widgets-one', key, { name }).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    expect(replay.headers['location']).toBe(first.headers['location']);
    const other = await post('widgets-one', key, { name: `${name}-other` }).expect(422);
    expect(other.body.code).toBe('idempotency_key_reused');
    expect(await widgets(name)).toBe(1);
    const done = await outcome(key);
    expect(done.state).toBe('completed');
  });

  it('answers 409 with Retry-After while the first runs (its key is in progress, with no row yet), then replays it', async () => {
    const key = randomUUID();
    const name = `one-busy-${key}`;
    const gate = t.app.get(WidgetGates).hold(name);
    const first = post('widgets-one', key, { name }).then((r) => r);
    await gate.reached;
    const duplicate = await post('widgets-one', key, { name }).expect(409);
    expect(duplicate.headers['retry-after']).toBe('1');
    expect(duplicate.body.code).toBe('idempotency_request_in_progress');
    expect((await outcome(key)).state).toBe('in_progress');
    expect(await countRows(t.dataSource, KEYS, 'fingerprint IS NOT NULL AND status IS NULL')).toBe(0);
    gate.open();
    const original = await first;
    expect(original.status).toBe(201);
    const replay = await post('widgets-one', key, { name }).expect(201);
    expect(replay.text).toBe(original.text);
    expect(await widgets(name)).toBe(1);
  });

  it('wait: a duplicate waits for the first to commit (woken by its announcement) and gets its replay', async () => {
    const key = randomUUID();
    const name = `one-wait-${key}`;
    const gate = t.app.get(WidgetGates).hold(name);
    const first = post('widgets-one-wait', key, { name }).then((r) => r);
    await gate.reached;
    const sent = proxy.counts().roundTrips;
    const duplicate = post('widgets-one-wait', key, { name }).then((r) => r);
    // Its first claim (BEGIN, the claim, COMMIT) found the key held: it is waiting now.
    await waitFor('the duplicate to find the key held', () => proxy.counts().roundTrips >= sent + 3);
    gate.open();
    const [original, waited] = await Promise.all([first, duplicate]);
    expect(original.status).toBe(201);
    expect(waited.status).toBe(201);
    expect(waited.headers['idempotent-replayed']).toBe('true');
    expect(waited.text).toBe(original.text);
    expect(await widgets(name)).toBe(1);
  });

  it('rolls a failed attempt back with its claim: nothing committed, the key unknown, a retry runs again', async () => {
    const key = randomUUID();
    const name = `one-fail-${key}`;
    await post('widgets-one', key, { name, fail: true }).expect(500);
    expect(await widgets(name)).toBe(0);
    expect(await outcome(key)).toMatchObject({ state: 'unknown' });
    await post('widgets-one', key, { name, fail: true }).expect(500);
    expect(await widgets(name)).toBe(0);
  });

  it('an owner paused past its lease cannot commit: the server ends its transaction, a retry claims and commits, one effect', async () => {
    const key = randomUUID();
    const name = `one-paused-${key}`;
    const gate = t.app.get(WidgetGates).hold(name);
    const paused = post('widgets-one', key, { name }).then((r) => r);
    await gate.reached;
    // Retries get 409 until the server ends the paused transaction (1 s lease), then one claims and commits.
    let retry = await post('widgets-one', key, { name });
    for (let i = 0; retry.status === 409 && i < 200; i++) {
      await new Promise((r) => setTimeout(r, 50));
      retry = await post('widgets-one', key, { name });
    }
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    gate.open();
    const late = await paused;
    expect(late.status).toBe(409);
    expect(late.body.code).toBe('idempotency_lease_lost');
    expect(await widgets(name)).toBe(1);
    const [row] = await t.dataSource.query<{ id: string }[]>('SELECT id FROM lib_widgets WHERE name = $1', [name]);
    expect(row.id).toBe(retry.body.id);
    const replay = await post('widgets-one', key, { name }).expect(201);
    expect(replay.text).toBe(retry.text);
  });

  it('counts statements, round trips and commits per new key and per replay in each mode', async () => {
    const measure = async (path: 'widgets' | 'widgets-one', replay: boolean): Promise<PgCounts> => {
      const key = randomUUID();
      const name = `count-${path}-${key}`;
      if (replay) await post(path, key, { name }).expect(201);
      const before = proxy.counts();
      await post(path, key, { name }).expect(201);
      const after = proxy.counts();
      return {
        statements: after.statements - before.statements,
        answers: after.answers - before.answers,
        roundTrips: after.roundTrips - before.roundTrips,
        commits: after.commits - before.commits,
      };
    };
    // Warm: each statement prepared once on some connection.
    for (let i = 0; i < 3; i++) {
      await measure('widgets', false);
      await measure('widgets-one', false);
    }
    const durable = await measure('widgets', false);
    const one = await measure('widgets-one', false);
    const durableReplay = await measure('widgets', true);
    const oneReplay = await measure('widgets-one', true);
    console.log(
      `per request on ${platform}, pipelined: ${pipeline} (the handler: one INSERT):\n` +
        `  new key, durable: ${JSON.stringify(durable)}\n  new key, commit one: ${JSON.stringify(one)}\n` +
        `  replay from the row, durable: ${JSON.stringify(durableReplay)}\n  replay from the row, commit one: ${JSON.stringify(oneReplay)}`,
    );
    expect(durable.commits).toBe(2);
    expect(one.commits).toBe(1);
    // Durable: the claim (autocommit), START, the handler, the completion and COMMIT.
    // One commit: START, the claim and its read under the lock, the handler, the key's INSERT and COMMIT.
    // A pipelined client sends the claim with its read, and the key's last write with COMMIT.
    expect({ durable: durable.roundTrips, one: one.roundTrips }).toEqual(pipeline ? { durable: 4, one: 4 } : { durable: 5, one: 6 });
    expect({ durable: durable.statements, one: one.statements }).toEqual({ durable: 5, one: 6 });
  });
});
