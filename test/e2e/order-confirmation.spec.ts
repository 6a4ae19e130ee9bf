import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { LoggingNotifier } from '../../src/notifications/notifier';
import { CLIENT_B, TestApp, createTestApp } from '../support/app';
import { createOrder } from '../support/fixtures';
import { redisSuites, redisUrl } from '../support/redis-server';

/**
 * POST /orders/{id}/confirmation: a send through the Notifier (a side effect
 * outside PostgreSQL), exactly once per key through the Redis store. Mounted
 * only when REDIS_URL is set.
 */
redisSuites()('POST /orders/{id}/confirmation (e2e)', () => {
  let t: TestApp;
  const confirm = (id: string, key: string, body: object, client?: { key: string }) =>
    request(t.app.getHttpServer()).post(`/orders/${id}/confirmation`).set(t.auth(client)).set('Idempotency-Key', key).send(body);

  beforeAll(async () => {
    t = await createTestApp({ env: { REDIS_URL: redisUrl() } });
  });
  afterAll(() => t?.close());

  it('sends once per key and replays the answer to a retry', async () => {
    const order = await createOrder(t);
    const notifier = t.app.get(LoggingNotifier);
    const before = notifier.sent().length;
    const key = randomUUID();
    const body = { channel: 'email', recipient: 'buyer@example.com' };
    const first = await confirm(order.id, key, body).expect(202);
    expect(first.body).toMatchObject({ order_id: order.id, channel: 'email', recipient: 'buyer@example.com' });
    const retry = await confirm(order.id, key, body).expect(202);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.text).toBe(first.text);
    expect(notifier.sent().length - before).toBe(1);
    expect(notifier.sent().at(-1)).toMatchObject({ id: first.body.id, subject: `Order ${order.id} confirmed` });
  });

  it("answers 404 for another client's order and 400 for a recipient that does not fit the channel, sending nothing", async () => {
    const order = await createOrder(t);
    const notifier = t.app.get(LoggingNotifier);
    const before = notifier.sent().length;
    await confirm(order.id, randomUUID(), { channel: 'email', recipient: 'buyer@example.com' }, CLIENT_B).expect(404);
    await confirm(order.id, randomUUID(), { channel: 'sms', recipient: 'buyer@example.com' }).expect(400);
    expect(notifier.sent().length).toBe(before);
  });

  it('is not mounted without REDIS_URL', async () => {
    const plain = await createTestApp();
    try {
      const order = await createOrder(plain);
      await request(plain.app.getHttpServer())
        .post(`/orders/${order.id}/confirmation`)
        .set(plain.auth())
        .set('Idempotency-Key', randomUUID())
        .send({ channel: 'email', recipient: 'buyer@example.com' })
        .expect(404);
    } finally {
      await plain.close();
    }
  });
});
