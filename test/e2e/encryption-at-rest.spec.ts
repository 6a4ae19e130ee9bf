import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { TestApp, createTestApp } from '../support/app';
import { orderBody } from '../support/fixtures';
import { keyIs } from '../support/keys';

/**
 * Stored responses encrypted at rest (IDEMPOTENCY_ENCRYPTION_KEYS): the row
 * holds no byte of the response in clear, a replay is still the original
 * response byte for byte, and a key is rotated without downtime: an instance
 * with the new key first still replays what the old key sealed, and seals new
 * responses with the new key. Replays come from the row (the replay cache off).
 */
const k1 = `k1:${Buffer.alloc(32, 1).toString('base64')}`;
const k2 = `k2:${Buffer.alloc(32, 2).toString('base64')}`;

describe('encryption at rest (e2e)', () => {
  let first: TestApp;
  let rotated: TestApp | undefined;
  const post = (t: TestApp, key: string, body: object) => request(t.app.getHttpServer()).post('/orders').set(t.auth()).set('Idempotency-Key', key).send(body);
  const row = async (t: TestApp, key: string) =>
    (await t.dataSource.query<{ body: string; headers: string | null }[]>(`SELECT body, headers FROM idempotency_keys WHERE ${keyIs()}`, [key]))[0];

  beforeAll(async () => {
    first = await createTestApp({ env: { IDEMPOTENCY_ENCRYPTION_KEYS: k1, IDEMPOTENCY_REPLAY_CACHE: '0' } });
  });
  afterAll(async () => {
    await rotated?.close();
    await first?.close();
  });

  it('keeps nothing of the response in clear, and replays it byte for byte', async () => {
    const key = randomUUID();
    const created = await post(first, key, orderBody()).expect(201);
    const stored = await row(first, key);
    expect(stored.body).not.toContain(created.body.id);
    expect(stored.headers).not.toContain('/orders');
    expect(JSON.parse(stored.headers!)).toMatchObject({ k: 'k1' });

    const replay = await post(first, key, orderBody()).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(created.text);
    expect(replay.headers.location).toBe(created.headers.location);
    expect(replay.headers['content-type']).toBe(created.headers['content-type']);
  });

  it('rotates without downtime: the old key still opens old records, new ones use the new key', async () => {
    const oldKey = randomUUID();
    const old = await post(first, oldKey, orderBody()).expect(201);
    rotated = await createTestApp({ database: first.db, env: { IDEMPOTENCY_ENCRYPTION_KEYS: `${k2},${k1}`, IDEMPOTENCY_REPLAY_CACHE: '0' } });

    const replay = await post(rotated, oldKey, orderBody()).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(old.text);

    const newKey = randomUUID();
    const created = await post(rotated, newKey, orderBody()).expect(201);
    expect(JSON.parse((await row(rotated, newKey)).headers!)).toMatchObject({ k: 'k2' });
    expect((await post(rotated, newKey, orderBody()).expect(201)).text).toBe(created.text);
    // The instance still on the old ring cannot open the new key's record: an error, never a wrong answer.
    const refused = await post(first, newKey, orderBody()).expect(500);
    expect(refused.text).not.toContain(created.body.id);
  });
});
