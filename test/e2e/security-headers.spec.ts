import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { TestApp, createTestApp } from '../support/app';
import { paymentBody } from '../support/fixtures';

/** Headers every response carries, and the Swagger UI still working under the CSP. */
describe('security headers (e2e)', () => {
  let t: TestApp;
  const http = () => request(t.app.getHttpServer());

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  const expectHardened = (res: request.Response, what: string) => {
    expect({ what, cache: res.headers['cache-control'] }).toEqual({ what, cache: 'no-store' });
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(res.headers['x-powered-by']).toBeUndefined();
  };

  it('on every kind of API response: data, created, replayed, 400, 401, 404', async () => {
    const key = randomUUID();
    const post = () => http().post('/payments').set(t.auth()).set('Idempotency-Key', key).send(paymentBody());
    expectHardened(await post().expect(201), 'POST 201');
    const replay = await post().expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expectHardened(replay, 'replay');
    expectHardened(await http().get('/payments').set(t.auth()).expect(200), 'GET 200');
    expectHardened(
      await http().post('/orders').set(t.auth()).set('Idempotency-Key', randomUUID()).set('Content-Type', 'application/json').send('{').expect(400),
      'invalid JSON',
    );
    expectHardened(await http().get('/orders').expect(401), '401');
    expectHardened(await http().get('/nope').set(t.auth()).expect(404), '404');
    expectHardened(await http().get('/health').expect(200), 'health');
  });

  it('keeps the Swagger UI at /docs working: its scripts are served from here, and the CSP allows them', async () => {
    const page = await http().get('/docs').expect(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    const csp = page.headers['content-security-policy'];
    expect(csp).toMatch(/script-src 'self'/);
    expect(csp).toMatch(/style-src [^;]*'unsafe-inline'/); // the page's own <style>
    expect(csp).toMatch(/img-src [^;]*data:/); // the UI's icons
    expect(csp).not.toContain('upgrade-insecure-requests'); // /docs over plain http keeps loading its scripts
    const scripts = [...page.text.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBeGreaterThan(0);
    for (const [, attributes, inline] of scripts) {
      expect(inline.trim()).toBe(''); // no inline script (script-src 'self' would block it)
      const src = /src="([^"]+)"/.exec(attributes)?.[1];
      const url = new URL(src!, 'http://api.example/docs');
      expect(url.origin).toBe('http://api.example'); // same origin: allowed by script-src 'self'
      await http().get(url.pathname).expect(200);
    }
    await http().get('/docs-json').expect(200);
  });
});
