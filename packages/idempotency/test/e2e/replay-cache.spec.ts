import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { DemoModule } from '../support/demo/widgets.module';
import { keyId } from '../support/keys-table';
import { LIBRARY_TABLE, LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from '../support/library-app';
import { countRows } from '../support/test-services';

/**
 * Replays answered from memory (ReplayCache), through HTTP on a real
 * PostgreSQL. The probe: the stored body is changed behind the app's back (no
 * path of the module ever changes a completed key), so a replay that still
 * answers the original bytes did not read the row.
 */
describe('replays from memory (e2e)', () => {
  const PRINCIPAL = 'client-a';
  const KEYS = `"${LIBRARY_TABLE}"`;
  let t: LibraryApp;
  let second: LibraryApp;
  let uncached: LibraryApp;
  const post = (app: LibraryApp, path: string, key: string, body: object) =>
    request(app.app.getHttpServer()).post(path).set(PRINCIPAL_HEADER, PRINCIPAL).set('Idempotency-Key', key).send(body);
  const tamper = (key: string) => t.dataSource.query(`UPDATE ${KEYS} SET body = '{"tampered":true}' WHERE id = $1 AND status IS NOT NULL`, [keyId(PRINCIPAL, key)]);

  beforeAll(async () => {
    t = await createLibraryApp('fastify', { imports: [DemoModule] });
    // Two more instances on the same database: one like the first, one with the cache off.
    second = await createLibraryApp('fastify', { imports: [DemoModule], database: t.db });
    uncached = await createLibraryApp('fastify', { imports: [DemoModule], database: t.db, idempotency: { replayCache: { enabled: false } } });
  });
  afterAll(async () => {
    await uncached.close();
    await second.close();
    await t.close();
  });

  it('answers a replay of its own completed key without reading the row', async () => {
    const key = randomUUID();
    const first = await post(t, '/demo/widgets', key, { name: 'cached' }).expect(201);
    await tamper(key);

    const replay = await post(t, '/demo/widgets', key, { name: 'cached' }).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(replay.headers['location']).toBe(first.headers['location']);
    expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    // The control: an instance without the cache reads the (changed) row.
    expect((await post(uncached, '/demo/widgets', key, { name: 'cached' }).expect(201)).text).toBe('{"tampered":true}');
  });

  it("keeps a replay read from the database: another instance's key, from its second replay on", async () => {
    const key = randomUUID();
    const first = await post(t, '/demo/widgets', key, { name: 'elsewhere' }).expect(201);
    expect((await post(second, '/demo/widgets', key, { name: 'elsewhere' }).expect(201)).text).toBe(first.text);
    await tamper(key);
    expect((await post(second, '/demo/widgets', key, { name: 'elsewhere' }).expect(201)).text).toBe(first.text);
  });

  it.each([
    ['a phased route (stored by finish())', undefined, 201],
    ['a declined phased route (a business outcome stored in its phase)', 'declined', 402],
  ])('answers a replay of %s from memory', async (_name, fail, status) => {
    const key = randomUUID();
    const body = { name: `phased-${key}`, fail };
    const first = await post(t, '/demo/phased', key, body).expect(status);
    await tamper(key);
    const replay = await post(t, '/demo/phased', key, body).expect(status);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(replay.headers['content-type']).toBe(first.headers['content-type']);
  });

  it('still answers 422 to the same key with another body', async () => {
    const key = randomUUID();
    await post(t, '/demo/widgets', key, { name: 'one' }).expect(201);
    await post(t, '/demo/widgets', key, { name: 'one' }).expect(201);
    const other = await post(t, '/demo/widgets', key, { name: 'two' }).expect(422);
    expect(other.body.code).toBe('idempotency_key_reused');
    expect(await countRows(t.dataSource, 'demo_widgets', 'name = $1', ['two'])).toBe(0);
  });

  it('serves a key no longer than its retention, on the database clock: past it the request runs anew', async () => {
    const key = randomUUID();
    const first = await post(t, '/demo/short-retention', key, { name: 'retained' }).expect(201); // retention 1.5 s
    expect((await post(t, '/demo/short-retention', key, { name: 'retained' }).expect(201)).headers['idempotent-replayed']).toBe('true');
    // Wait until the database itself says the key has expired.
    const expired = () => countRows(t.dataSource, KEYS, 'id = $1 AND expires_at <= now()', [keyId(PRINCIPAL, key)]);
    while ((await expired()) === 0) await new Promise((r) => setTimeout(r, 50));

    const again = await post(t, '/demo/short-retention', key, { name: 'retained' }).expect(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.body.id).not.toBe(first.body.id);
    expect(await countRows(t.dataSource, 'demo_widgets', 'name = $1', ['retained'])).toBe(2);
  });

  it("does not keep a response that the app's outer transaction then rolls back", async () => {
    const key = randomUUID();
    await post(t, '/demo/outer/rolled-back', key, { name: 'rolled-back' }).set('X-Demo-Roll-Back', '1').expect(500);
    expect(await countRows(t.dataSource, 'demo_widgets', 'name = $1', ['rolled-back'])).toBe(0);
    // Nothing is stored: the key is still in progress (its claim committed on its own), never a replay.
    const retry = await post(t, '/demo/outer/rolled-back', key, { name: 'rolled-back' });
    expect(retry.status).toBe(409);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    // Under an app's transaction nothing is kept, even when it commits: its replays read the row.
    const committed = randomUUID();
    await post(t, '/demo/outer/rolled-back', committed, { name: 'committed' }).expect(201);
    await post(t, '/demo/outer/rolled-back', committed, { name: 'committed' }).expect(201);
    await tamper(committed);
    expect((await post(t, '/demo/outer/rolled-back', committed, { name: 'committed' }).expect(201)).text).toBe('{"tampered":true}');
  });
});
