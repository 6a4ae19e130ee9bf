import { verifyWebhook } from '@safe-retries/client';
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import request from 'supertest';
import { SecretsAtRest } from '../../src/webhook-endpoints/secrets-at-rest';
import { TestApp, createTestApp } from '../support/app';
import { TestDatabase, createTestDatabase } from '../support/database';
import { createOrder } from '../support/fixtures';

/**
 * A rotated secret keeps signing beside the new one for 24 h (the database's
 * clock, from the rotation), so a receiver that switched and one that has not
 * both verify every delivery; then, or at once with `expire_previous`, only
 * the new one signs. A real receiver; the overlap's end is reached by moving
 * the rotation 25 h back in the database.
 */
jest.setTimeout(120_000);

const keys = (...ids: string[]) => ids.map((id) => `${id}:${KEYS[id]}`).join(',');
const KEYS: Record<string, string> = Object.fromEntries(['k1', 'k2'].map((id) => [id, randomBytes(32).toString('base64')]));

type Delivery = { headers: http.IncomingHttpHeaders; body: string };

describe('webhook secret rotation with overlap (e2e)', () => {
  let db: TestDatabase;
  let t: TestApp;
  let server: http.Server;
  const received: Delivery[] = [];
  const boot = (ring: string) => createTestApp({ database: db, env: { IDEMPOTENCY_ENCRYPTION_KEYS: ring } });
  const api = () => request(t.app.getHttpServer());

  /** A new order, and the delivery of its `order.created` event to the receiver. */
  async function delivery(): Promise<Delivery> {
    const order = await createOrder(t);
    const end = Date.now() + 60_000;
    for (;;) {
      const found = received.find((d) => (JSON.parse(d.body) as { data: { id: string } }).data.id === order.id);
      if (found) return found;
      if (Date.now() > end) throw new Error(`no delivery of order ${order.id}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const verifies = (d: Delivery, secret: string) => {
    try {
      new Webhook(secret).verify(d.body, d.headers as Record<string, string>);
      return true;
    } catch {
      return false;
    }
  };
  const stored = async (id: string) =>
    (await t.dataSource.query<{ secret: string; previous_secret: string | null }[]>('SELECT secret, previous_secret FROM webhook_endpoints WHERE id = $1', [id]))[0];

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push({ headers: req.headers, body });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    db = await createTestDatabase();
    t = await boot(keys('k1'));
  });
  afterAll(async () => {
    await t?.close();
    await new Promise((resolve) => server.close(resolve));
    await db?.drop();
  });

  it('signs with both secrets for 24 h after a rotation (through a reseal at boot), then with the new one only; expire_previous ends it at once', async () => {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
    const created = await api().post('/webhook-endpoints').set(t.auth()).set('Idempotency-Key', randomUUID()).send({ url, event_types: ['order.created'] }).expect(201);
    const id = created.body.id as string;
    const first = created.body.secret as string;

    const rotation = randomUUID();
    const rotated = await api().post(`/webhook-endpoints/${id}/rotate`).set(t.auth()).set('Idempotency-Key', rotation).expect(200);
    const second = rotated.body.secret as string;
    expect(second).toMatch(/^whsec_/);
    expect(second).not.toBe(first);
    expect(JSON.stringify(rotated.body)).not.toContain(first);

    // Within the overlap: two signatures, each verifies on its own.
    let d = await delivery();
    expect((d.headers['webhook-signature'] as string).split(' ')).toHaveLength(2);
    expect([verifies(d, first), verifies(d, second)]).toEqual([true, true]);
    // The SDK's verifyWebhook too, given either secret.
    for (const secret of [first, second]) await expect(verifyWebhook(d.body, d.headers, secret)).resolves.toMatchObject({ type: 'order.created' });

    // Both secrets are sealed; a new newest key reseals both at boot, and both still sign.
    const underK1 = await stored(id);
    expect(underK1).toEqual({ secret: expect.stringMatching(/^sealed:v1:k1:/), previous_secret: expect.stringMatching(/^sealed:v1:k1:/) });
    await t.close();
    t = await boot(keys('k2', 'k1'));
    expect(await stored(id)).toEqual({ secret: expect.stringMatching(/^sealed:v1:k2:/), previous_secret: expect.stringMatching(/^sealed:v1:k2:/) });
    // Only the previous one under an older key (a rotation by an instance that had not resealed yet): resealed too.
    await t.dataSource.query('UPDATE webhook_endpoints SET previous_secret = $2 WHERE id = $1', [id, underK1.previous_secret]);
    expect(await t.app.get(SecretsAtRest, { strict: false }).reseal()).toBe(1);
    expect((await stored(id)).previous_secret).toMatch(/^sealed:v1:k2:/);
    // A retry of the rotation answers its secret again, opened from the row now sealed under k2: once rotated, the same bytes.
    const retried = await api().post(`/webhook-endpoints/${id}/rotate`).set(t.auth()).set('Idempotency-Key', rotation).expect(200);
    expect(retried.headers['idempotent-replayed']).toBe('true');
    expect(retried.text).toBe(rotated.text);
    d = await delivery();
    expect([verifies(d, first), verifies(d, second)]).toEqual([true, true]);
    const listed = await api().get('/webhook-endpoints').set(t.auth()).expect(200);
    expect(JSON.stringify(listed.body)).not.toContain('whsec_');

    // 25 h after the rotation on the database's clock: only the new secret signs.
    await t.dataSource.query(`UPDATE webhook_endpoints SET rotated_at = rotated_at - interval '25 hours' WHERE id = $1`, [id]);
    d = await delivery();
    expect((d.headers['webhook-signature'] as string).split(' ')).toHaveLength(1);
    expect([verifies(d, first), verifies(d, second)]).toEqual([false, true]);

    // Rotated again: the one it replaces signs beside the new; the oldest no more.
    const third = (await api().post(`/webhook-endpoints/${id}/rotate`).set(t.auth()).set('Idempotency-Key', randomUUID()).send({}).expect(200)).body.secret as string;
    d = await delivery();
    expect([verifies(d, first), verifies(d, second), verifies(d, third)]).toEqual([false, true, true]);

    // Bad input: a problem, nothing changed.
    const before = await stored(id);
    const refused = await api().post(`/webhook-endpoints/${id}/rotate`).set(t.auth()).set('Idempotency-Key', randomUUID()).send({ expire_previous: 'yes' }).expect(400);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.body.errors.map((e: { field: string }) => e.field)).toEqual(['expire_previous']);
    expect(await stored(id)).toEqual(before);

    // expire_previous: no new secret, none answered; from now on only the current one signs.
    const expired = await api().post(`/webhook-endpoints/${id}/rotate`).set(t.auth()).set('Idempotency-Key', randomUUID()).send({ expire_previous: true }).expect(200);
    expect(expired.body).toEqual(expect.objectContaining({ id, status: 'enabled' }));
    expect(expired.body).not.toHaveProperty('secret');
    expect(await stored(id)).toEqual({ secret: before.secret, previous_secret: null });
    d = await delivery();
    expect([verifies(d, second), verifies(d, third)]).toEqual([false, true]);
  });
});
