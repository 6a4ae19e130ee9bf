import { randomUUID } from 'node:crypto';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import request from 'supertest';
import { PgCountingProxy, startPgCountingProxy } from '../../packages/idempotency/test/support/pg-counting-proxy';
import { REDELIVERIES_PER_HOUR } from '../../src/http/route-access';
import { OrdersService } from '../../src/orders/orders.service';
import { MAX_ENDPOINTS_PER_CLIENT } from '../../src/webhook-endpoints/webhook-endpoints.service';
import { CLIENT_B, TestApp, countRows, createTestApp } from '../support/app';
import { TestDatabase, createTestDatabase } from '../support/database';
import { createOrder } from '../support/fixtures';

/**
 * What one client may make the relay do: at most MAX_ENDPOINTS_PER_CLIENT
 * endpoints (so one event is queued at most that many times, in the change's
 * transaction), even when it registers many at once; and at most
 * REDELIVERIES_PER_HOUR redeliveries an hour, a budget of its own that leaves
 * another client's untouched. The fan-out itself costs the change's
 * transaction the same statements for one endpoint as for the most a client
 * may have: the app reaches PostgreSQL through a proxy that counts the
 * statements the server ran (pg-counting-proxy.ts).
 */
jest.setTimeout(60_000);

describe('webhook endpoints and redeliveries, bounded per client (e2e)', () => {
  let t: TestApp;
  let db: TestDatabase;
  let proxy: PgCountingProxy;
  const http = () => request(t.app.getHttpServer());
  const register = (n: number, client?: { key: string }) =>
    http().post('/webhook-endpoints').set(t.auth(client)).set('Idempotency-Key', randomUUID()).send({ url: `http://127.0.0.1:9/hooks/${n}`, event_types: ['order.created'] });

  beforeAll(async () => {
    db = await createTestDatabase();
    const server = new URL(db.url);
    proxy = await startPgCountingProxy({ host: server.hostname, port: Number(server.port) });
    t = await createTestApp({ env: { IDEMPOTENCY_JOBS: 'off', RATE_LIMIT_PER_CLIENT: '1000' }, database: { ...db, url: proxy.url(db.url) } });
  });
  afterAll(async () => {
    await t?.close();
    await proxy?.close();
    await db?.drop();
  });

  it(`an order's transaction runs as many statements with ${MAX_ENDPOINTS_PER_CLIENT} endpoints as with 1: its fan-out is one statement`, async () => {
    const [{ id: clientId }] = await t.dataSource.query<{ id: string }[]>(`SELECT id FROM clients WHERE name = $1`, [CLIENT_B.name]);
    await t.dataSource.query('DELETE FROM webhook_endpoints WHERE client_id = $1', [clientId]);
    const txHost = t.app.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost);
    const orders = t.app.get(OrdersService, { strict: false });
    /**
     * The statements of what POST /orders runs in its key's transaction (the
     * order, its event, a delivery per endpoint), counted by the server and
     * then rolled back: no message commits (and with the jobs off no relay
     * runs here). The fewest of three runs: the API keys' reading (every 4 s)
     * may fall into one. Each run must have queued a delivery for every
     * endpoint.
     */
    const statements = async (endpoints: number) => {
      const runs: number[] = [];
      for (let run = 0; run < 3; run++) {
        const rolledBack = txHost.withTransaction(async () => {
          const queued = async () => Number((await txHost.tx.query<{ n: string }[]>('SELECT count(*) AS n FROM idempotency_outbox'))[0].n);
          const was = await queued();
          const before = proxy.counts().statements;
          await orders.create(clientId, { currency: 'usd', items: [{ sku: 'sku_fan_out', quantity: 1, unit_amount: 100 }] });
          runs.push(proxy.counts().statements - before);
          throw new Error(`rolled back, ${(await queued()) - was} queued`);
        });
        await expect(rolledBack).rejects.toThrow(`rolled back, ${endpoints} queued`);
      }
      return Math.min(...runs);
    };
    await register(0, CLIENT_B).expect(201);
    const one = await statements(1);
    for (let n = 1; n < MAX_ENDPOINTS_PER_CLIENT; n++) await register(n, CLIENT_B).expect(201);
    const most = await statements(MAX_ENDPOINTS_PER_CLIENT);
    expect({ one, most }).toEqual({ one, most: one });
    // The order, the event with its endpoints, their deliveries.
    expect(one).toBe(3);
    await t.dataSource.query('DELETE FROM webhook_endpoints WHERE client_id = $1', [clientId]);
  });

  it(`a client has at most ${MAX_ENDPOINTS_PER_CLIENT} endpoints, also when it registers many at once`, async () => {
    const answers = await Promise.all(Array.from({ length: MAX_ENDPOINTS_PER_CLIENT + 4 }, (_, n) => register(n)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(MAX_ENDPOINTS_PER_CLIENT);
    const refused = answers.filter((a) => a.status === 422);
    expect(refused).toHaveLength(4);
    expect(refused[0].headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused[0].body).toMatchObject({ code: 'webhook_endpoint_limit' });
    expect(await countRows(t.dataSource, 'webhook_endpoints', 'client_id = (SELECT id FROM clients WHERE name = $1)', ['client-a'])).toBe(MAX_ENDPOINTS_PER_CLIENT);
    // Another client's endpoints are its own count.
    await register(0, CLIENT_B).expect(201);
    // One deleted, one more fits.
    const some = answers.find((a) => a.status === 201)!.body as { id: string };
    await http().delete(`/webhook-endpoints/${some.id}`).set(t.auth()).expect(204);
    await register(99).expect(201);
    await register(100).expect(422);
  });

  it(`redeliveries have a budget of ${REDELIVERIES_PER_HOUR} an hour per client; another client's is untouched`, async () => {
    const order = await createOrder(t);
    const events = (await http().get('/events').set(t.auth()).expect(200)).body as { data: { id: string; data: { id: string } }[] };
    const eventId = events.data.find((e) => e.data.id === order.id)!.id;
    for (let i = 0; i < REDELIVERIES_PER_HOUR; i++) await http().post(`/events/${eventId}/redeliver`).set(t.auth()).send({}).expect(202);
    const refused = await http().post(`/events/${eventId}/redeliver`).set(t.auth()).send({}).expect(429);
    expect(refused.body).toMatchObject({ code: 'rate_limited' });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    // Other routes keep the client's per-second budget only.
    await http().get('/events').set(t.auth()).expect(200);
    const otherOrder = await createOrder(t, undefined, CLIENT_B);
    const theirs = (await http().get('/events').set(t.auth(CLIENT_B)).expect(200)).body as { data: { id: string; data: { id: string } }[] };
    const theirEvent = theirs.data.find((e) => e.data.id === otherOrder.id)!.id;
    await http().post(`/events/${theirEvent}/redeliver`).set(t.auth(CLIENT_B)).send({}).expect(202);
  });
});
