import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { TestApp, countRows, createTestApp } from '../support/app';
import { waitFor } from '../support/http-client';
import { keyIs } from '../support/keys';
import { lockTableWrites } from '../../packages/idempotency/test/support/table-lock';

/**
 * Registration and rotation are exactly-once under an Idempotency-Key, like
 * every other create route, and a retry answers the same secret again. The
 * secret is never stored with the key's answer: the app runs without a key
 * ring, so both the keys table's responses and the endpoints' secrets are
 * kept in clear, and the keys table's row is read whole for it. No replay
 * cache: every retry reads the key's row (the library's own suite replays a
 * route with `replay` from the cache).
 */
jest.setTimeout(60_000);

type KeyRow = Record<string, unknown> & { status: number; body: string };

describe('webhook endpoints under an Idempotency-Key (e2e)', () => {
  let t: TestApp;
  const api = () => request(t.app.getHttpServer());
  const register = (key: string | undefined, body: object) => {
    const r = api().post('/webhook-endpoints').set(t.auth());
    return (key === undefined ? r : r.set('Idempotency-Key', key)).send(body);
  };
  const rotate = (key: string, id: string, body: object = {}) => api().post(`/webhook-endpoints/${id}/rotate`).set(t.auth()).set('Idempotency-Key', key).send(body);
  const keyRow = async (key: string) => (await t.dataSource.query<KeyRow[]>(`SELECT * FROM idempotency_keys WHERE ${keyIs()}`, [key]))[0];
  const endpoint = async (id: string) =>
    (
      await t.dataSource.query<{ secret: string; previous_secret: string | null; secret_version: number }[]>(
        'SELECT secret, previous_secret, secret_version FROM webhook_endpoints WHERE id = $1',
        [id],
      )
    )[0];
  /** The row holds nothing of these secrets: neither whole nor their random part. */
  const holdsNone = (row: KeyRow, ...secrets: string[]) => {
    const text = JSON.stringify(row);
    expect(text).not.toContain('whsec_');
    for (const secret of secrets) expect(text).not.toContain(secret.slice('whsec_'.length));
  };

  beforeAll(async () => {
    t = await createTestApp({ env: { IDEMPOTENCY_REPLAY_CACHE: '0' } });
  });
  afterAll(() => t?.close());

  it('registers once per key: a retry answers the same endpoint and secret, byte for byte, and the keys table never holds the secret', async () => {
    const key = randomUUID();
    const body = { url: 'https://hooks.example.com/once', event_types: ['order.created'] };
    const first = await register(key, body).expect(201);
    const secret = first.body.secret as string;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(first.headers['idempotent-replayed']).toBeUndefined();

    for (let i = 0; i < 2; i++) {
      const replay = await register(key, body).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.headers['content-type']).toBe(first.headers['content-type']);
      expect(replay.text).toBe(first.text);
    }
    expect(await countRows(t.dataSource, 'webhook_endpoints', 'url = $1', [body.url])).toBe(1);

    const row = await keyRow(key);
    expect(row.status).toBe(201);
    const { secret: _, ...answered } = first.body as Record<string, unknown>;
    expect(JSON.parse(row.body)).toEqual({ ...answered, secret_version: 1 });
    holdsNone(row, secret);
    expect((await endpoint(first.body.id as string)).secret).toBe(secret);

    // Another request with the key: 422, nothing registered.
    const other = await register(key, { ...body, url: 'https://hooks.example.com/other' }).expect(422);
    expect(other.body).toMatchObject({ code: 'idempotency_key_reused' });
    expect(await countRows(t.dataSource, 'webhook_endpoints', 'url = $1', ['https://hooks.example.com/other'])).toBe(0);
  });

  it('needs an Idempotency-Key, as every create route does', async () => {
    const refused = await register(undefined, { url: 'https://hooks.example.com/keyless', event_types: ['*'] }).expect(400);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.body).toMatchObject({ code: 'idempotency_key_missing' });
    expect(await countRows(t.dataSource, 'webhook_endpoints', 'url = $1', ['https://hooks.example.com/keyless'])).toBe(0);
  });

  it('answers 409 to a duplicate while the first registration runs, then the same answer', async () => {
    const key = randomUUID();
    const body = { url: 'https://hooks.example.com/concurrent', event_types: ['*'] };
    // The first request's INSERT waits behind the test's lock: it has claimed its key and is still running.
    const lock = await lockTableWrites(t.db.url, 'webhook_endpoints');
    let first: Promise<request.Response>;
    try {
      first = register(key, body).then((r) => r);
      await waitFor('the first request to claim its key', () => keyRow(key));
      const duplicate = await register(key, body).expect(409);
      expect(duplicate.body).toMatchObject({ code: 'idempotency_request_in_progress' });
      expect(duplicate.headers['retry-after']).toBeDefined();
    } finally {
      await lock.release();
    }
    const answered = await first;
    expect(answered.status).toBe(201);
    const replay = await register(key, body).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(answered.text);
    expect(await countRows(t.dataSource, 'webhook_endpoints', 'url = $1', [body.url])).toBe(1);
  });

  it('rotates once per key: a retry answers the same new secret, never stored with the key; replaced since: 410; deleted: 404', async () => {
    const createKey = randomUUID();
    const created = await register(createKey, { url: 'https://hooks.example.com/rotated', event_types: ['*'] }).expect(201);
    const id = created.body.id as string;
    const original = created.body.secret as string;

    const key = randomUUID();
    const first = await rotate(key, id).expect(200);
    const secret = first.body.secret as string;
    expect(secret).toMatch(/^whsec_/);
    expect(secret).not.toBe(original);
    const replay = await rotate(key, id).expect(200);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    // Rotated once: the secret it replaced is the original one (a second rotation would have kept the first rotation's).
    expect(await endpoint(id)).toEqual({ secret, previous_secret: original, secret_version: 2 });
    holdsNone(await keyRow(key), secret, original);

    // The key on another endpoint's rotation: another request, 422.
    const elsewhere = await register(randomUUID(), { url: 'https://hooks.example.com/elsewhere', event_types: ['*'] }).expect(201);
    expect((await rotate(key, elsewhere.body.id as string).expect(422)).body).toMatchObject({ code: 'idempotency_key_reused' });
    expect((await endpoint(elsewhere.body.id as string)).secret_version).toBe(1);

    // expire_previous shows no secret: its answer is stored and replayed as it is.
    const expireKey = randomUUID();
    const expired = await rotate(expireKey, id, { expire_previous: true }).expect(200);
    expect(expired.body).not.toHaveProperty('secret');
    expect((await rotate(expireKey, id, { expire_previous: true }).expect(200)).text).toBe(expired.text);
    // The secret that rotation made is still in force: its retry still shows it.
    expect((await rotate(key, id).expect(200)).text).toBe(first.text);

    // A later rotation replaces it: a retry of the rotation (or of the registration) no longer shows a secret.
    const later = await rotate(randomUUID(), id).expect(200);
    for (const stale of [rotate(key, id), register(createKey, { url: 'https://hooks.example.com/rotated', event_types: ['*'] })]) {
      const gone = await stale.expect(410);
      expect(gone.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(gone.body).toMatchObject({ code: 'webhook_secret_replaced' });
      expect(gone.text).not.toContain('whsec_');
    }
    expect((await endpoint(id)).secret).toBe(later.body.secret);

    await api().delete(`/webhook-endpoints/${id}`).set(t.auth()).expect(204);
    expect((await rotate(key, id).expect(404)).body).toMatchObject({ code: 'not_found' });
  });
});
