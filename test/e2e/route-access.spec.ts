import type { RouteOptions } from 'fastify';
import Stripe from 'stripe';
import request from 'supertest';
import { DEFAULT_WEBHOOK_SECRET } from '../../src/config/config';
import type { RouteAccess } from '../../src/http/route-access';
import { TestApp, createTestApp, metricsAuth } from '../support/app';

const ACCESSES: (RouteAccess | undefined)[] = ['public', 'signed', 'metrics-token', undefined];
const signer = new Stripe('sk_test_signer_only');

/** One request per method of a route, its path parameters filled in. */
function requestsOf(route: RouteOptions): { method: string; path: string; access: RouteAccess | undefined }[] {
  const path = route.url.replace(/:[^/]+/g, 'x').replace(/\*$/, 'x');
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  return methods.map((method) => ({ method, path, access: route.config?.access }));
}

/**
 * Every route the app serves (its controllers, /graphql, the docs) is
 * authenticated once, by the access it declares, and nothing else: without a
 * credential it gets that access's refusal, with one it passes.
 */
describe('route access (e2e)', () => {
  let t: TestApp;
  const routes: RouteOptions[] = [];
  const send = (method: string, path: string) => {
    const req = request(t.app.getHttpServer())[method.toLowerCase() as 'get'](path);
    return ['GET', 'HEAD', 'OPTIONS'].includes(method) ? req : req.set('Content-Type', 'application/json').send('{}');
  };
  beforeAll(async () => {
    t = await createTestApp({ onRoute: (route) => routes.push(route) });
  });
  afterAll(() => t.close());

  it('each route declares one access that auth knows', () => {
    expect(routes.length).toBeGreaterThan(20);
    for (const route of routes) expect(ACCESSES).toContain(route.config?.access);
  });

  it('without a credential, each route gets the refusal of its access', async () => {
    for (const { method, path, access } of routes.flatMap(requestsOf)) {
      const res = await send(method, path);
      const answer = `${method} ${path} (${access ?? 'api key'}): ${res.status} ${(res.body as { code?: string }).code ?? ''}`;
      if (access === 'public') expect(answer).not.toMatch(/: (401|429) /);
      else if (access === 'signed') expect(answer).toMatch(/: 400 invalid_webhook_signature$/);
      else if (method === 'HEAD') expect(answer).toMatch(/: 401 $/);
      else expect(answer).toMatch(/: 401 unauthorized$/);
    }
  });

  it('with its credential, each route passes', async () => {
    const payload = JSON.stringify({ id: 'evt_route_access', object: 'event', type: 'customer.created', data: { object: { object: 'customer', id: 'cus_1' } } });
    for (const { method, path, access } of routes.flatMap(requestsOf)) {
      let req = send(method, path);
      if (access === undefined) req = req.set(t.auth());
      if (access === 'metrics-token') req = req.set(metricsAuth());
      if (access === 'signed') req = request(t.app.getHttpServer()).post(path).set('Content-Type', 'application/json').set('Stripe-Signature', signer.webhooks.generateTestHeaderString({ payload, secret: DEFAULT_WEBHOOK_SECRET })).send(payload);
      const res = await req;
      expect(`${method} ${path}: ${res.status}`).not.toMatch(/: (401|429)$/);
      if (access === 'signed') expect(res.body).toEqual({ received: true, effect: 'nothing_to_do' });
    }
  });
});
