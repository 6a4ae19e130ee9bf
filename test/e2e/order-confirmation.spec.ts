import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { LoggingNotifier, Notification, Notifier, SentNotification } from '../../src/notifications/notifier';
import { CLIENT_A, CLIENT_B, TestApp, createTestApp } from '../support/app';
import { confirmationsPerClientPerHour } from '../support/config';
import { createTestDatabase } from '../support/database';
import { builtFile } from '../support/dist';
import { createOrder } from '../support/fixtures';
import { redisSuites, redisUrl } from '../support/redis-server';

/** Resolves once `condition` holds (asked every 50 ms), or fails after 20 s. */
async function eventually(condition: () => boolean | Promise<boolean>): Promise<void> {
  const end = Date.now() + 20_000;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error('the condition did not hold within 20 s');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Confirmations of the order queued in the outbox (committed), on the app's database. */
async function queued(dataSource: DataSource, orderId: string): Promise<number> {
  const [{ n }] = (await dataSource.query(`SELECT count(*)::int AS n FROM idempotency_outbox WHERE payload->>'subject' = $1`, [`Order ${orderId} confirmed`])) as { n: number }[];
  return n;
}

/**
 * POST /orders/{id}/confirmation: the confirmation is queued in the outbox in
 * the transaction that stores the request's key (PostgreSQL), and the relay
 * sends it through the Notifier after the commit, with the message's id as
 * its idempotency key. Mounted only when REDIS_URL is set (the caps).
 */
redisSuites()('POST /orders/{id}/confirmation (e2e)', () => {
  let t: TestApp;
  const confirm = (id: string, key: string, body: object, client?: { key: string }) =>
    request(t.app.getHttpServer()).post(`/orders/${id}/confirmation`).set(t.auth(client)).set('Idempotency-Key', key).send(body);

  beforeAll(async () => {
    t = await createTestApp({ env: { REDIS_URL: redisUrl() } });
  });
  afterAll(() => t?.close());

  it('queues once per key with the key, sends after the commit under the message id, and replays the answer to a retry', async () => {
    const order = await createOrder(t);
    const notifier = t.app.get(LoggingNotifier);
    const key = randomUUID();
    const body = { channel: 'email', recipient: 'buyer@example.com' };
    const first = await confirm(order.id, key, body).expect(202);
    expect(first.body).toEqual({ id: expect.any(String), order_id: order.id, channel: 'email', recipient: 'buyer@example.com' });
    const retry = await confirm(order.id, key, body).expect(202);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.text).toBe(first.text);
    const dataSource = t.app.get(DataSource);
    // The message committed with the key: one row, whose id the response carries.
    expect(await dataSource.query(`SELECT id::text FROM idempotency_outbox WHERE payload->>'subject' = $1`, [`Order ${order.id} confirmed`])).toEqual([
      { id: first.body.id },
    ]);
    await eventually(() => notifier.sent().some((s) => s.key === first.body.id));
    expect(notifier.sent().filter((s) => s.subject === `Order ${order.id} confirmed`)).toEqual([
      expect.objectContaining({ key: first.body.id, recipient: 'buyer@example.com', channel: 'email' }),
    ]);
    // A second delivery under the same id (a relay killed after its send) sends nothing twice.
    await notifier.send(notifier.sent().find((s) => s.key === first.body.id)!, first.body.id);
    expect(notifier.sent().filter((s) => s.key === first.body.id)).toHaveLength(1);
  });

  it("answers 404 for another client's order and 400 for a recipient that does not fit the channel, sending nothing", async () => {
    const order = await createOrder(t);
    const notifier = t.app.get(LoggingNotifier);
    const before = notifier.sent().length;
    await confirm(order.id, randomUUID(), { channel: 'email', recipient: 'buyer@example.com' }, CLIENT_B).expect(404);
    await confirm(order.id, randomUUID(), { channel: 'sms', recipient: 'buyer@example.com' }).expect(400);
    expect(await queued(t.app.get(DataSource), order.id)).toBe(0);
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

/**
 * How many confirmations go out: at most 3 per order a day and 1000 per client
 * an hour (5 here), counted in Redis so
 * that two instances allow what one does; past a cap, 429 with Retry-After and
 * nothing sent.
 */
describe('order confirmations are capped per order and per client (e2e)', () => {
  const CLIENT_C = { name: 'client-c', key: 'sk_test_client_c_0123456789abcdef' };
  const CLIENT_D = { name: 'client-d', key: 'sk_test_client_d_0123456789abcdef' };
  const env = {
    REDIS_URL: redisUrl(),
    API_KEYS: [CLIENT_A, CLIENT_B, CLIENT_C, CLIENT_D].map((c) => `${c.name}:${c.key}`).join(','),
  };
  /** Two instances on one database and one Redis. */
  let one: TestApp;
  let two: TestApp;
  const body = { channel: 'email', recipient: 'buyer@example.com' };
  const confirm = (t: TestApp, id: string, client: { key: string }, key = randomUUID()) =>
    request(t.app.getHttpServer()).post(`/orders/${id}/confirmation`).set(t.auth(client)).set('Idempotency-Key', key).send(body);
  /** Confirmations of the order sent by either instance's relay, once every queued one has been sent. */
  const sent = async (orderId: string) => {
    const count = () => [one, two].flatMap((t) => t.app.get(LoggingNotifier).sent()).filter((n) => n.subject === `Order ${orderId} confirmed`).length;
    const committed = await queued(one.app.get(DataSource), orderId);
    await eventually(() => count() >= committed);
    return count();
  };
  const expectCapped = (res: request.Response, windowS: number, detail: RegExp) => {
    expect(res.status).toBe(429);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ code: 'rate_limited', detail: expect.stringMatching(detail) });
    const retryAfter = Number(res.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(windowS - 120);
    expect(retryAfter).toBeLessThanOrEqual(windowS);
  };

  beforeAll(async () => {
    one = await createTestApp({ env, config: confirmationsPerClientPerHour(5) });
    two = await createTestApp({ env, config: confirmationsPerClientPerHour(5), database: one.db });
  });
  afterAll(async () => {
    await two?.close();
    await one?.close();
  });

  it('sends an order at most 3 times in 24 hours, on any instance; the 4th is a 429 and sends nothing; a replay counts nothing', async () => {
    const order = await createOrder(one, undefined, CLIENT_A);
    const firstKey = randomUUID();
    await confirm(one, order.id, CLIENT_A, firstKey).expect(202);
    await confirm(two, order.id, CLIENT_A).expect(202);
    const replay = await confirm(two, order.id, CLIENT_A, firstKey).expect(202);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    await confirm(one, order.id, CLIENT_A).expect(202);
    const refusedKey = randomUUID();
    expectCapped(await confirm(two, order.id, CLIENT_A, refusedKey), 86_400, /sent 3 times in 24 hours/);
    expect(await sent(order.id)).toBe(3);
    // Refused, not stored: the key stays free, and the same request is refused again.
    expectCapped(await confirm(one, order.id, CLIENT_A, refusedKey), 86_400, /sent 3 times/);
    expect(await sent(order.id)).toBe(3);
  });

  it('sends at most 5 confirmations of one client in an hour, over all its orders and instances; other clients still send', async () => {
    const orders = [await createOrder(one, undefined, CLIENT_B), await createOrder(one, undefined, CLIENT_B), await createOrder(one, undefined, CLIENT_B)];
    for (const [t, order] of [[one, orders[0]], [two, orders[0]], [one, orders[0]], [two, orders[1]], [one, orders[1]]] as const) {
      await confirm(t, order.id, CLIENT_B).expect(202);
    }
    expectCapped(await confirm(two, orders[2].id, CLIENT_B), 3_600, /5 order confirmations within the hour/);
    expect(await sent(orders[2].id)).toBe(0);
    const other = await createOrder(one, undefined, CLIENT_C);
    await confirm(two, other.id, CLIENT_C).expect(202);
  });

  it('lets exactly 3 of 12 concurrent confirmations of one order through two instances', async () => {
    const order = await createOrder(one, undefined, CLIENT_D);
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => confirm(i % 2 ? one : two, order.id, CLIENT_D)));
    expect(answers.map((a) => a.status).sort()).toEqual([...Array(3).fill(202), ...Array(9).fill(429)]);
    expect(await sent(order.id)).toBe(3);
  });
});

/**
 * With the production rules, the notifier that only logs is refused: the route
 * would answer 202 and send nothing. A real notifier bound to Notifier starts.
 */
describe('order confirmations in production (e2e)', () => {
  jest.setTimeout(60_000);

  it('refuses to start with REDIS_URL and the logging notifier: exit 1, one line naming REDIS_URL', async () => {
    const db = await createTestDatabase();
    try {
      const env = {
        PATH: process.env.PATH,
        NODE_ENV: 'production',
        PORT: '0',
        DATABASE_URL: db.url,
        REDIS_URL: redisUrl(),
        CARD_NETWORK_URL: 'https://api.stripe.com',
        CARD_NETWORK_SECRET: 'sk_live_confirmations_spec_0123456789',
        CARD_NETWORK_WEBHOOK_SECRET: 'whsec_confirmations_spec_0123456789',
        IDEMPOTENCY_ENCRYPTION_KEYS: 'k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=',
        LOG_LEVEL: 'warn',
      };
      const refused = await promisify(execFile)(process.execPath, [builtFile('src/main.js')], { env, timeout: 30_000 }).then(
        () => undefined,
        (error: { code: number; stderr: string }) => error,
      );
      expect(refused?.code).toBe(1);
      expect(refused?.stderr.trim().split('\n')).toHaveLength(1);
      expect(refused?.stderr.trim()).toMatch(/^refusing to start: REDIS_URL mounts POST \/orders\/\{id\}\/confirmation, whose notifier \(LoggingNotifier\) only logs/);
    } finally {
      await db.drop();
    }
  });

  it('starts with REDIS_URL once a real notifier is bound, and sends through it', async () => {
    const sends: Notification[] = [];
    const provider: Notifier = {
      send: (n: Notification, key: string): Promise<SentNotification> => {
        sends.push(n);
        return Promise.resolve({ ...n, id: randomUUID(), key, sentAt: new Date() });
      },
    };
    const t = await createTestApp({ env: { NODE_ENV: 'production', REDIS_URL: redisUrl() }, overrides: [{ provide: Notifier, useValue: provider }] });
    try {
      const order = await createOrder(t);
      await request(t.app.getHttpServer())
        .post(`/orders/${order.id}/confirmation`)
        .set(t.auth())
        .set('Idempotency-Key', randomUUID())
        .send({ channel: 'email', recipient: 'buyer@example.com' })
        .expect(202);
      await eventually(() => sends.length > 0);
      expect(sends).toEqual([expect.objectContaining({ recipient: 'buyer@example.com', subject: `Order ${order.id} confirmed` })]);
    } finally {
      await t.close();
    }
  });
});
