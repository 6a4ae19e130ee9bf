import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import request from 'supertest';
import { WEBHOOK_DELIVERY_TOPIC } from '../../src/events/webhook-delivery.port';
import { ORDER_CONFIRMATION_TOPIC } from '../../src/notifications/confirmation-publisher';
import { LoggingNotifier } from '../../src/notifications/notifier';
import { TestApp, createTestApp } from '../support/app';
import { createOrder } from '../support/fixtures';
import { redisSuites, redisUrl } from '../support/redis-server';

jest.setTimeout(60_000);

/** Resolves once `condition` holds (asked every 50 ms), or fails after 20 s. */
async function eventually(condition: () => boolean | Promise<boolean>): Promise<void> {
  const end = Date.now() + 20_000;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error('the condition did not hold within 20 s');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Workers: an instance with IDEMPOTENCY_JOBS=off serves requests and queues
 * their messages (an order's confirmation, a webhook delivery) in the
 * request's transaction, but runs no relay: nothing leaves it. An instance
 * with the jobs on, on the same database, sends them.
 */
redisSuites()('IDEMPOTENCY_JOBS=off: the messages an instance queues are sent by one with the jobs on (e2e)', () => {
  let serving: TestApp;
  let worker: TestApp | undefined;
  let receiver: http.Server;
  const received: { headers: http.IncomingHttpHeaders; body: string }[] = [];
  let secret: string;
  let orderId: string;
  let confirmationId: string;

  const outbox = async () =>
    serving.dataSource.query<{ id: string; topic: string; delivered: boolean }[]>(
      `SELECT id::text, topic, delivered_at IS NOT NULL AS delivered FROM idempotency_outbox ORDER BY seq`,
    );

  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push({ headers: req.headers, body });
        res.writeHead(200).end('thanks');
      });
    });
    await new Promise<void>((listening) => receiver.listen(0, '127.0.0.1', listening));
    serving = await createTestApp({ env: { IDEMPOTENCY_JOBS: 'off', REDIS_URL: redisUrl() } });
  });
  afterAll(async () => {
    await worker?.close();
    await serving?.close();
    await new Promise((closed) => receiver?.close(closed));
  });

  it('an instance with the jobs off queues the confirmation and the webhook delivery, and sends neither', async () => {
    const { port } = receiver.address() as AddressInfo;
    const endpoint = await request(serving.app.getHttpServer())
      .post('/webhook-endpoints')
      .set(serving.auth())
      .set('Idempotency-Key', randomUUID())
      .send({ url: `http://127.0.0.1:${port}/hooks`, event_types: ['order.created'] })
      .expect(201);
    secret = endpoint.body.secret;
    orderId = (await createOrder(serving)).id;
    const confirmed = await request(serving.app.getHttpServer())
      .post(`/orders/${orderId}/confirmation`)
      .set(serving.auth())
      .set('Idempotency-Key', randomUUID())
      .send({ channel: 'email', recipient: 'buyer@example.com' })
      .expect(202);
    confirmationId = confirmed.body.id;
    // Queued with their changes: the order's event to the endpoint, then the confirmation.
    expect(await outbox()).toEqual([
      { id: expect.any(String), topic: WEBHOOK_DELIVERY_TOPIC, delivered: false },
      { id: confirmationId, topic: ORDER_CONFIRMATION_TOPIC, delivered: false },
    ]);
    expect(serving.app.get(LoggingNotifier).sent()).toEqual([]);
  });

  it('an instance with the jobs on, on the same database, sends both', async () => {
    worker = await createTestApp({ database: serving.db, env: { IDEMPOTENCY_JOBS: 'on', REDIS_URL: redisUrl() } });
    const notifier = worker.app.get(LoggingNotifier);
    await eventually(async () => (await outbox()).every((m) => m.delivered));
    expect(notifier.sent().map((s) => s.key)).toEqual([confirmationId]);
    const events = received.map((r) => new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as { type: string; data: { id: string } });
    expect(events).toEqual([expect.objectContaining({ type: 'order.created', data: expect.objectContaining({ id: orderId }) })]);
    // A relay in the serving instance would have taken them at their commit (its NOTIFY), long
    // before the worker started: the confirmation went out through the worker's notifier alone.
    expect(serving.app.get(LoggingNotifier).sent()).toEqual([]);
  });
});
