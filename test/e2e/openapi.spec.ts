import request from 'supertest';
import { TestApp, createTestApp } from '../support/app';

/** The OpenAPI document tells clients the idempotency contract, by itself. */
describe('OpenAPI document (e2e)', () => {
  let t: TestApp;
  let doc: {
    info: { description: string };
    components: { securitySchemes: Record<string, unknown>; schemas: Record<string, unknown> };
    paths: Record<string, Record<string, {
      description?: string;
      parameters?: { name: string; in: string; required?: boolean; description?: string; schema?: { maxLength?: number } }[];
      responses: Record<string, { description?: string; headers?: Record<string, unknown> }>;
      'x-idempotency'?: Record<string, unknown>;
    }>>;
  };

  beforeAll(async () => {
    t = await createTestApp({ env: { IDEMPOTENCY_RETENTION: '48h', IDEMPOTENCY_LEASE: '20s' } });
    doc = (await request(t.app.getHttpServer()).get('/docs-json').expect(200)).body;
  });
  afterAll(() => t.close());

  it('states the policy in info.description with the configured retention', () => {
    expect(doc.info.description).toContain('Idempotency-Key');
    expect(doc.info.description).toContain('**48h**');
    expect(doc.info.description).toContain('idempotency_request_in_progress');
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  it.each([
    ['/payments', 'post', {}],
    ['/orders', 'post', { commit: 'one' }],
    ['/orders/{id}/cancel', 'post', {}],
    ['/payments/{id}/refunds', 'post', {}],
    ['/webhook-endpoints', 'post', {}],
    ['/webhook-endpoints/{id}/rotate', 'post', {}],
  ])('documents %s %s as idempotent', (path, method, mode) => {
    const op = doc.paths[path][method];
    expect(op['x-idempotency']).toEqual({ header: 'Idempotency-Key', required: true, lease: '20s', retention: '48h', scope: 'client', ...mode });
    const header = op.parameters!.find((p) => p.in === 'header' && p.name === 'Idempotency-Key')!;
    expect(header.required).toBe(true);
    expect(header.schema!.maxLength).toBe(255);
    expect(header.description).toMatch(/quoted string/);
    expect(header.description).toContain('48h');
    expect(op.responses['409'].headers).toHaveProperty('Retry-After');
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['400', '401', '409', '422']));
    const success = Object.keys(op.responses).find((s) => /^2/.test(s))!;
    expect(op.responses[success].headers).toHaveProperty('Idempotent-Replayed');
    expect(op.description).toContain('Idempotent-Replayed');
  });

  it('tells that order creation runs in one transaction with its key, with no lease to wait out', () => {
    const header = doc.paths['/orders'].post.parameters!.find((p) => p.name === 'Idempotency-Key')!;
    expect(header.description).toContain('Runs in one transaction with its key, bounded by 20s (no lease to wait out: a crashed attempt frees the key at once)');
    expect(doc.paths['/payments'].post.parameters!.find((p) => p.name === 'Idempotency-Key')!.description).toContain('Lease 20s (renewed while the request works)');
  });

  it("lists the payment routes' own problem codes beside the library's", () => {
    const about = (path: string, status: string) => doc.paths[path].post.responses[status].description!;
    for (const path of ['/payments', '/payments/{id}/refunds']) {
      expect(about(path, '409')).toContain('idempotency_request_in_progress');
      expect(about(path, '409')).toContain('requires_attention');
      expect(about(path, '502')).toContain('card_network_object_unknown');
    }
    expect(about('/payments', '409')).toContain('order_payment_conflict');
  });

  it('tells that a retried registration or rotation shows its secret again, and 410 once a later rotation replaced it', () => {
    for (const path of ['/webhook-endpoints', '/webhook-endpoints/{id}/rotate']) {
      const op = doc.paths[path].post;
      expect(op.description).toContain('`410 webhook_secret_replaced`');
      expect(op.responses['410'].description).toContain('webhook_secret_replaced');
    }
  });

  it('does not mark read-only routes idempotent-keyed', () => {
    expect(doc.paths['/payments'].get['x-idempotency']).toBeUndefined();
    expect(doc.paths['/payments/{id}'].get.parameters!.some((p) => p.name === 'Idempotency-Key')).toBe(false);
  });

  it('serves the policy page that problem types point to', async () => {
    const res = await request(t.app.getHttpServer()).get('/docs/idempotency').expect(200);
    expect(res.headers['content-type']).toMatch(/^text\/markdown/);
    expect(res.text).toContain('48h');
  });
});
