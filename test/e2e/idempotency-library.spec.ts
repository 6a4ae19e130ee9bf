import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from '../support/library/library-app';
import { countRows } from '../support/app';
import { waitFor } from '../support/http-client';
import { MISSING_KEY_PROBLEM } from '../support/problems';

/**
 * The idempotency module on its own, in an app with Nest's default exception
 * filter: its problems are complete problem+json responses without any help
 * from the app (code, Link, Retry-After), and a route works exactly-once.
 */
describe('the idempotency module as a library (e2e)', () => {
  let t: LibraryApp;
  const principal = randomUUID();
  const post = (key: string | undefined, body: object) => {
    const r = request(t.app.getHttpServer()).post('/lib/widgets').set(PRINCIPAL_HEADER, principal).send(body);
    return key === undefined ? r : r.set('Idempotency-Key', key);
  };
  const widgets = (name: string) => countRows(t.dataSource, 'lib_widgets', 'name = $1', [name]);

  beforeAll(async () => {
    t = await createLibraryApp();
  });
  afterAll(() => t.close());

  it('runs the first request once and replays it byte for byte', async () => {
    const key = randomUUID();
    const first = await post(key, { name: 'lib-once' }).expect(201);
    expect(first.headers['location']).toBe(`/lib/widgets/${first.body.id}`);
    const replay = await post(key, { name: 'lib-once' }).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    expect(await widgets('lib-once')).toBe(1);
  });

  it('answers 400 without a key as problem+json, the same bytes the app sends', async () => {
    const res = await post(undefined, { name: 'lib-missing' }).expect(400);
    expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(res.text).toBe(MISSING_KEY_PROBLEM);
    expect(res.headers['link']).toBe('</docs/idempotency>; rel="describedby"');
    expect(await widgets('lib-missing')).toBe(0);
  });

  it('answers 400 idempotency_key_invalid for a malformed key', async () => {
    const res = await post('"unterminated', { name: 'lib-invalid' }).expect(400);
    expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(res.body).toMatchObject({ status: 400, code: 'idempotency_key_invalid', type: '/docs/idempotency#idempotency_key_invalid' });
  });

  it('answers 422 idempotency_key_reused for another body', async () => {
    const key = randomUUID();
    await post(key, { name: 'lib-one' }).expect(201);
    const res = await post(key, { name: 'lib-two' }).expect(422);
    expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(res.body).toMatchObject({ status: 422, code: 'idempotency_key_reused', title: 'Idempotency-Key Reused' });
    expect(res.headers['link']).toBe('</docs/idempotency>; rel="describedby"');
    expect(await widgets('lib-two')).toBe(0);
  });

  it('answers 409 with Retry-After while the first request runs, then replays it', async () => {
    const key = randomUUID();
    const slow = post(key, { name: 'lib-slow', delay_ms: 1000 }).then((r) => r);
    await waitFor('the claim', async () => (await countRows(t.dataSource, 'idempotency_keys', 'key = $1', [key])) > 0);
    const dup = await post(key, { name: 'lib-slow', delay_ms: 1000 }).expect(409);
    expect(dup.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(dup.body).toMatchObject({ status: 409, code: 'idempotency_request_in_progress' });
    expect(dup.headers['retry-after']).toBe('1');
    expect(dup.headers['link']).toBe('</docs/idempotency>; rel="describedby"');
    const first = await slow;
    expect(first.status).toBe(201);
    expect((await post(key, { name: 'lib-slow', delay_ms: 1000 }).expect(201)).text).toBe(first.text);
    expect(await widgets('lib-slow')).toBe(1);
  });
});
