import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { ClientsService } from '../../src/auth/clients.service';
import { CLIENT_A, CLIENT_B, TestApp, createTestApp } from '../support/app';
import { waitFor } from '../support/http-client';

/** Per client (RATE_LIMIT_PER_CLIENT a second) and per address for failed authentications (RATE_LIMIT_UNAUTHENTICATED a minute). */
describe('rate limits (e2e)', () => {
  const expectRateLimited = (res: request.Response) => {
    expect(res.status).toBe(429);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 429, code: 'rate_limited' });
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  };

  describe('per client', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ env: { RATE_LIMIT_PER_CLIENT: '5' } });
    });
    afterAll(() => t.close());

    it('answers a client over its limit 429 rate_limited, across routes, while another client and public routes are served', async () => {
      // Within one second (the window): 5 requests pass, on different routes.
      const started = Date.now();
      const served = [];
      for (const path of ['/orders', '/payments', '/orders', '/payments', '/orders']) served.push(await http().get(path).set(t.auth(CLIENT_A)).expect(200));
      const over = await http().get('/orders').set(t.auth(CLIENT_A));
      const post = await http().post('/payments').set(t.auth(CLIENT_A)).set('Idempotency-Key', randomUUID()).send({});
      const other = await http().get('/orders').set(t.auth(CLIENT_B));
      for (let i = 0; i < 10; i++) await http().get('/health').expect(200);
      expect(Date.now() - started).toBeLessThan(1_000); // else the window moved and the test proves nothing
      expectRateLimited(over);
      expectRateLimited(post);
      expect(other.status).toBe(200);
      // The budget is told on every counted answer (the throttler's headers, named after it).
      expect(served.map((r) => [r.headers['x-ratelimit-limit-client'], r.headers['x-ratelimit-remaining-client']])).toEqual(
        ['4', '3', '2', '1', '0'].map((left) => ['5', left]),
      );
      for (const r of served) expect(Number(r.headers['x-ratelimit-reset-client'])).toBe(1);
      expect(Number(over.headers['retry-after-client'])).toBeGreaterThan(0);
      expect(other.headers['x-ratelimit-remaining-client']).toBe('4');
      const health = await http().get('/health').expect(200);
      expect(health.headers['x-ratelimit-limit-client']).toBeUndefined();
    });
  });

  describe('failed authentications per address', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ env: { RATE_LIMIT_UNAUTHENTICATED: '10' } });
    });
    afterAll(() => t.close());

    it('answers a flood of bad keys 429 before the body is parsed, while a valid key this instance never saw works', async () => {
      // Created after the app started and never used: no cache of this instance knows it.
      const fresh = await t.app.get(ClientsService).create(`fresh-${randomUUID()}`);
      const freshAuth = { Authorization: `Bearer ${fresh.apiKey}` };
      for (let i = 0; i < 10; i++) {
        await http().get('/orders').set('Authorization', `Bearer sk_guess_${i}_0123456789abcdef`).expect(401);
      }
      expectRateLimited(await http().get('/orders').set('Authorization', 'Bearer sk_guess_next_0123456789abcdef'));
      expectRateLimited(await http().get('/orders'));
      // Refused before the body parser: invalid JSON is not even read (else 400 invalid_json).
      expectRateLimited(await http().post('/orders').set('Content-Type', 'application/json').send('{"not json'));
      expectRateLimited(await http().post('/orders').set('Authorization', 'Bearer sk_guess_post_0123456789abcdef').set('Content-Type', 'application/json').send('{"not json'));
      // Valid keys work from the same address: the fresh one, and one seen before.
      await http().get('/orders').set(freshAuth).expect(200);
      await http().post('/orders').set(freshAuth).set('Idempotency-Key', randomUUID()).send({ currency: 'usd', items: [{ sku: 'a', quantity: 1, unit_amount: 1 }] }).expect(201);
      await http().get('/orders').set(t.auth(CLIENT_A)).expect(200);
      // Still blocked for anything else.
      expectRateLimited(await http().get('/orders'));
    });
  });

  describe('requests without a key (a client that opens its connections with unauthenticated GETs)', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ env: { RATE_LIMIT_UNAUTHENTICATED: '3' } });
    });
    afterAll(() => t.close());

    it('block the address for requests without a valid key only', async () => {
      for (let i = 0; i < 3; i++) await http().get('/orders').expect(401);
      expectRateLimited(await http().get('/payments'));
      const fresh = await t.app.get(ClientsService).create(`fresh-${randomUUID()}`);
      for (const path of ['/orders', '/payments', '/orders']) {
        await http().get(path).set('Authorization', `Bearer ${fresh.apiKey}`).expect(200);
      }
      await http().get('/orders').set(t.auth(CLIENT_B)).expect(200);
    });
  });

  describe('unknown keys', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp();
    });
    afterAll(() => t.close());

    it('are remembered for a few seconds: the same bad key again costs no query', async () => {
      const lookups = jest.spyOn(t.dataSource, 'getRepository');
      try {
        for (let i = 0; i < 20; i++) {
          await request(t.app.getHttpServer()).get('/orders').set('Authorization', 'Bearer sk_unknown_0123456789abcdef').expect(401);
        }
        expect(lookups).toHaveBeenCalledTimes(1);
      } finally {
        lookups.mockRestore();
      }
    });
  });
});

describe('a removed key (e2e)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('stops working within 5 s of its client being deleted, though it was cached', async () => {
    const http = () => request(t.app.getHttpServer());
    await t.dataSource.query(`INSERT INTO clients (name) VALUES ('short-lived')`);
    await t.dataSource.query(
      `INSERT INTO client_keys (client_id, key_hash) SELECT id, sha256('sk_short_lived_0123456789abcdef'::bytea) FROM clients WHERE name = 'short-lived'`,
    );
    const auth = { Authorization: 'Bearer sk_short_lived_0123456789abcdef' };
    await http().get('/orders').set(auth).expect(200);
    await t.dataSource.query(`DELETE FROM clients WHERE name = 'short-lived'`);
    const deleted = Date.now();
    await waitFor('the deleted key to be refused', async () => (await http().get('/orders').set(auth)).status === 401, { timeoutMs: 8_000, intervalMs: 200 });
    expect(Date.now() - deleted).toBeLessThanOrEqual(5_500);
  });
});
