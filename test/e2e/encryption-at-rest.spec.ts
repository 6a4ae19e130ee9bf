import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { TestApp, createTestApp } from '../support/app';
import { orderBody, paymentBody } from '../support/fixtures';
import { keyIs } from '../support/keys';

/**
 * Stored responses encrypted at rest (IDEMPOTENCY_ENCRYPTION_KEYS): the row
 * holds no byte of the response in clear, a replay is still the original
 * response byte for byte, and a key is rotated without downtime: an instance
 * with the new key first still replays what the old key sealed, and seals new
 * responses with the new key. Replays come from the row (the replay cache off).
 * Whoever can write the table cannot change what a retry is answered: a
 * stored 402 edited into a 201, another row's response swapped in, or a row
 * put in clear are refused (500, the logged error naming the key), never
 * replayed.
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

  describe('a row edited by someone who can write the table is refused, never replayed', () => {
    const update = (t: TestApp, key: string, set: string, params: unknown[]) =>
      t.dataSource.query(`UPDATE idempotency_keys SET ${set} WHERE ${keyIs()}`, [key, ...params]);
    const pay = (t: TestApp, key: string, body: object) => request(t.app.getHttpServer()).post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body);

    it('a stored 402 turned into a 201: 500, no payment answered', async () => {
      const key = randomUUID();
      const body = paymentBody({ source: 'tok_chargeDeclined' });
      const declined = await pay(first, key, body).expect(402);
      expect((await pay(first, key, body).expect(402)).text).toBe(declined.text);
      await update(first, key, 'status = 201', []);
      const edited = await pay(first, key, body);
      expect(edited.status).toBe(500);
      expect(edited.headers['idempotent-replayed']).toBeUndefined();
    });

    it("another key's sealed response copied into the row: 500", async () => {
      const [mine, theirs] = [randomUUID(), randomUUID()];
      await post(first, mine, orderBody()).expect(201);
      const other = await post(first, theirs, orderBody()).expect(201);
      const { body, headers } = await row(first, theirs);
      await update(first, mine, 'body = $2, headers = $3', [body, headers]);
      const swapped = await post(first, mine, orderBody());
      expect(swapped.status).toBe(500);
      expect(swapped.text).not.toContain(other.body.id);
    });

    it('the row put in clear (the sealed marker dropped): 500, the forged body never answered', async () => {
      const key = randomUUID();
      await post(first, key, orderBody()).expect(201);
      await update(first, key, 'body = $2, headers = NULL', ['{"id":"forged"}']);
      const forged = await post(first, key, orderBody());
      expect(forged.status).toBe(500);
      expect(forged.text).not.toContain('forged');
    });
  });
});
