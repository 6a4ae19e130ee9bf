import request from 'supertest';
import { freePort } from '@safe-retries/dev-postgres';
import { METRICS_TOKEN, TestApp, createTestApp, failedAuthLimit, metricsAuth } from '../support/app';
import { createTestDatabase, TestDatabase } from '../support/database';

/** Who may read /metrics: METRICS_TOKEN on the API port, or its own port (METRICS_PORT), or nobody. */
describe('/metrics access (e2e)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  describe('with METRICS_TOKEN', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ database: db });
    });
    afterAll(() => t.close());

    it('answers only Authorization: Bearer <METRICS_TOKEN>', async () => {
      const none = await http().get('/metrics').expect(401);
      expect(none.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(none.body.code).toBe('unauthorized');
      expect(none.text).not.toContain('process_cpu');
      await http().get('/metrics').set('Authorization', `Bearer ${METRICS_TOKEN}x`).expect(401);
      await http().get('/metrics').set('Authorization', `Bearer ${METRICS_TOKEN.slice(0, -1)}`).expect(401);
      await http().get('/metrics').set(t.auth()).expect(401); // an API key is not the metrics token
      expect((await http().get('/metrics').set(metricsAuth()).expect(200)).text).toContain('process_cpu_seconds_total');
    });
  });

  describe('failed tokens', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ database: db, config: failedAuthLimit(3) });
    });
    afterAll(() => t.close());

    it('count as failed authentications of the address: past the limit its requests without a valid credential get 429', async () => {
      await http().get('/metrics').expect(401);
      for (let i = 0; i < 2; i++) await http().get('/metrics').set('Authorization', `Bearer ${METRICS_TOKEN}${i}`).expect(401);
      expect((await http().get('/orders')).status).toBe(429);
      expect((await http().get('/metrics').set('Authorization', `Bearer ${METRICS_TOKEN}x`)).status).toBe(429);
      // Valid credentials still work from that address: the metrics token and an API key.
      expect((await http().get('/metrics').set(metricsAuth()).expect(200)).text).toContain('process_cpu_seconds_total');
      await http().get('/orders').set(t.auth()).expect(200);
    });
  });

  describe('with neither METRICS_TOKEN nor METRICS_PORT', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp({ database: db, env: { METRICS_TOKEN: '' } });
    });
    afterAll(() => t.close());

    it('is not served at all: 404 as an unknown route, with or without credentials', async () => {
      const res = await request(t.app.getHttpServer()).get('/metrics').set(t.auth()).expect(404);
      expect(res.body.code).toBe('not_found');
      expect(res.text).not.toContain('process_cpu');
    });
  });

  describe('with METRICS_PORT', () => {
    let t: TestApp;
    let port: number;
    beforeAll(async () => {
      port = await freePort();
      t = await createTestApp({ database: db, env: { METRICS_TOKEN: '', METRICS_PORT: String(port) } });
    });
    afterAll(() => t.close());

    it('serves it on that port on the loopback address, and not on the API port', async () => {
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('http_request_duration_seconds');
      expect((await fetch(`http://127.0.0.1:${port}/orders`)).status).toBe(404);
      await request(t.app.getHttpServer()).get('/metrics').set(metricsAuth()).expect(404);
    });

    it('counts failed tokens on that port too: past the limit 429, while the right token works', async () => {
      const other = await freePort();
      const second = await createTestApp({ database: db, env: { METRICS_TOKEN, METRICS_PORT: String(other) }, config: failedAuthLimit(2) });
      try {
        const url = `http://127.0.0.1:${other}/metrics`;
        expect((await fetch(url)).status).toBe(401);
        expect((await fetch(url, { headers: { Authorization: `Bearer ${METRICS_TOKEN}x` } })).status).toBe(401);
        const refused = await fetch(url);
        expect(refused.status).toBe(429);
        expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        expect((await fetch(url, { headers: metricsAuth() })).status).toBe(200);
        // The same address's budget as on the API port.
        expect((await request(second.app.getHttpServer()).get('/orders')).status).toBe(429);
      } finally {
        await second.close();
      }
    });

    it('stops listening when the app closes', async () => {
      const other = await freePort();
      const second = await createTestApp({ database: db, env: { METRICS_TOKEN, METRICS_PORT: String(other) } });
      expect((await fetch(`http://127.0.0.1:${other}/metrics`)).status).toBe(401);
      expect((await fetch(`http://127.0.0.1:${other}/metrics`, { headers: metricsAuth() })).status).toBe(200);
      await second.close();
      await expect(fetch(`http://127.0.0.1:${other}/metrics`)).rejects.toThrow();
    });
  });
});
