import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { REDELIVERIES_PER_HOUR } from '../../src/http/route-access';
import { MAX_ENDPOINTS_PER_CLIENT } from '../../src/webhook-endpoints/webhook-endpoints.service';
import { CLIENT_B, TestApp, countRows, createTestApp } from '../support/app';
import { createOrder } from '../support/fixtures';

/**
 * What one client may make the relay do: at most MAX_ENDPOINTS_PER_CLIENT
 * endpoints (so one event is queued at most that many times, in the change's
 * transaction), even when it registers many at once; and at most
 * REDELIVERIES_PER_HOUR redeliveries an hour, a budget of its own that leaves
 * another client's untouched.
 */
jest.setTimeout(60_000);

describe('webhook endpoints and redeliveries, bounded per client (e2e)', () => {
  let t: TestApp;
  const http = () => request(t.app.getHttpServer());
  const register = (n: number, client?: { key: string }) =>
    http().post('/webhook-endpoints').set(t.auth(client)).set('Idempotency-Key', randomUUID()).send({ url: `http://127.0.0.1:9/hooks/${n}`, event_types: ['order.created'] });

  beforeAll(async () => {
    t = await createTestApp({ env: { IDEMPOTENCY_JOBS: 'off', RATE_LIMIT_PER_CLIENT: '1000' } });
  });
  afterAll(() => t?.close());

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
