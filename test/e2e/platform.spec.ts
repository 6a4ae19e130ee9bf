import { connect } from 'node:net';
import request from 'supertest';
import { TestApp, createTestApp, metricsAuth } from '../support/app';
import { createOrder } from '../support/fixtures';

/** Cross-cutting HTTP behaviour: CORS for browser clients, request ids, problem+json for the framework's own errors. */
describe('platform (e2e)', () => {
  let t: TestApp;
  const http = () => request(t.app.getHttpServer());

  beforeAll(async () => {
    t = await createTestApp({ env: { HTTP_CORS_ORIGINS: 'https://shop.example,https://admin.example' } });
  });
  afterAll(() => t.close());

  it('answers a CORS preflight for an allowed origin with the idempotency headers allowed', async () => {
    const res = await http()
      .options('/payments')
      .set('Origin', 'https://shop.example')
      .set('Access-Control-Request-Method', 'POST')
      .set('Access-Control-Request-Headers', 'idempotency-key,authorization,content-type')
      .expect(204);
    expect(res.headers['access-control-allow-origin']).toBe('https://shop.example');
    const allowed = res.headers['access-control-allow-headers'].toLowerCase();
    for (const h of ['idempotency-key', 'authorization', 'content-type']) expect(allowed).toContain(h);
  });

  it('exposes Idempotent-Replayed, Retry-After and X-Request-Id to browsers', async () => {
    const res = await http().get('/orders').set(t.auth()).set('Origin', 'https://admin.example').expect(200);
    const exposed = res.headers['access-control-expose-headers'].toLowerCase();
    for (const h of ['idempotent-replayed', 'retry-after', 'x-request-id']) expect(exposed).toContain(h);
  });

  it('does not allow other origins', async () => {
    const res = await http().get('/orders').set(t.auth()).set('Origin', 'https://evil.example').expect(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('echoes a plain incoming X-Request-Id and makes one otherwise', async () => {
    expect((await http().get('/health').set('X-Request-Id', 'req-123.abc').expect(200)).headers['x-request-id']).toBe('req-123.abc');
    const made = (await http().get('/health').set('X-Request-Id', 'bad id with spaces').expect(200)).headers['x-request-id'];
    expect(made).toMatch(/^[0-9a-f-]{36}$/);
    const longest = 'a'.repeat(128);
    expect((await http().get('/health').set('X-Request-Id', longest).expect(200)).headers['x-request-id']).toBe(longest);
    for (const refused of ['a'.repeat(129), 'user@host', 'a/b', 'x;y', '${jndi}']) {
      expect((await http().get('/health').set('X-Request-Id', refused).expect(200)).headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  it('answers an unknown route with a 404 problem and an unsupported method alike', async () => {
    const res = await http().get('/nope').set(t.auth()).expect(404);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 404, code: 'not_found', title: 'Not Found' });
    await http().delete('/payments').set(t.auth()).expect(404);
  });

  it('routes a path with a trailing slash like the path', async () => {
    const order = await createOrder(t);
    const list = await http().get('/orders').set(t.auth()).expect(200);
    const slashed = await http().get('/orders/').set(t.auth()).expect(200);
    // The same handler answered: the same list, with the order just made in it.
    expect(slashed.body).toEqual(list.body);
    expect(slashed.body.data.map((o: { id: string }) => o.id)).toContain(order.id);
    expect((await http().get(`/orders/${order.id}/`).set(t.auth()).expect(200)).body).toEqual(
      (await http().get(`/orders/${order.id}`).set(t.auth()).expect(200)).body,
    );
    const health = (await http().get('/health').expect(200)).body;
    expect(health).toMatchObject({ status: 'ok' });
    expect((await http().get('/health/').expect(200)).body).toEqual(health);
  });

  it('serves Prometheus metrics with the HTTP histogram by route and status', async () => {
    await http().get('/orders').set(t.auth()).expect(200);
    const text = (await http().get('/metrics').set(metricsAuth()).expect(200)).text;
    expect(text).toMatch(/http_request_duration_seconds_count\{method="GET",route="\/orders",status="200"\} [1-9]/);
    expect(text).toContain('process_cpu_seconds_total');
  });
});

/**
 * What one raw HTTP exchange brings back: the bytes the server sent until it
 * closed the connection. A server that waited for the announced body would
 * never answer: the body is never sent.
 */
function exchange(url: string, text: string): Promise<string> {
  const { port, hostname } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(text));
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
    socket.on('error', reject);
    socket.on('close', () => resolve(received));
  });
}

describe('a preflight reads no body (e2e)', () => {
  const preflight = (headers: string) =>
    `OPTIONS /payments HTTP/1.1\r\nHost: api\r\nOrigin: https://shop.example\r\nAccess-Control-Request-Method: POST\r\nContent-Type: application/json\r\n${headers}\r\n`;

  it.each([
    ['with HTTP_CORS_ORIGINS', { HTTP_CORS_ORIGINS: 'https://shop.example' }],
    ['without CORS', {}],
  ])('%s: a preflight announcing 100 KB, never sent, is answered 413 at once and the connection closed', async (_name, env) => {
    const t = await createTestApp({ listen: true, env });
    try {
      for (const framing of ['Content-Length: 102400\r\n', 'Transfer-Encoding: chunked\r\n']) {
        const answer = await exchange(t.url!, preflight(framing));
        expect(answer).toMatch(/^HTTP\/1\.1 413 /);
        expect(answer).toMatch(/\r\nconnection: close\r\n/i);
        expect(answer).toContain('"code":"payload_too_large"');
      }
      // A body that is sent is not parsed either: no 400 for its broken JSON, and the bytes are no next request.
      const broken = await exchange(t.url!, `${preflight('Content-Length: 5\r\n')}{{{{{GET /health HTTP/1.1\r\nHost: api\r\n\r\n`);
      expect(broken.match(/^HTTP\/1\.1 \d+/gm)).toEqual(['HTTP/1.1 413']);
      // A preflight without a body is answered as before.
      const plain = await request(t.url!).options('/payments').set('Origin', 'https://shop.example').set('Access-Control-Request-Method', 'POST');
      expect(plain.status).toBe('HTTP_CORS_ORIGINS' in env ? 204 : 404);
    } finally {
      await t.close();
    }
  });
});
