import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { TestApp, countRows, createTestApp } from '../support/app';
import { DemoModule } from '../support/demo/demo.module';
import { waitFor } from '../support/http-client';
import { histogram, peakConcurrency, timed } from '../support/race';
import { keyIs } from '../support/keys';

/**
 * `@Idempotent({ wait })`: a duplicate of a request in progress waits for the
 * owner (woken by LISTEN/NOTIFY when the key settles) and gets the replay; past
 * its wait it gets the usual 409 with Retry-After.
 */
describe('@Idempotent({ wait }) (e2e)', () => {
  let t: TestApp;
  const post = (path: string, key: string, body: object) => request(t.url!).post(path).set(t.auth()).set('Idempotency-Key', key).send(body);
  const claimed = (key: string) =>
    waitFor('the key to be claimed', async () => (await countRows(t.dataSource, 'idempotency_keys', `${keyIs()} AND status IS NULL`, [key])) === 1);

  beforeAll(async () => {
    t = await createTestApp({ imports: [DemoModule], listen: true });
  });
  afterAll(() => t.close());

  it('answers a duplicate that arrives while the first runs with the replay, once the first finishes', async () => {
    const key = randomUUID();
    const body = { name: 'wait-replay', delay_ms: 700 };
    const first = timed(post('/demo/waiting', key, body));
    await claimed(key);
    const dup = await timed(post('/demo/waiting', key, body));
    const original = await first;
    expect(original.status).toBe(201);
    expect(dup.status).toBe(201);
    expect(dup.headers['idempotent-replayed']).toBe('true');
    expect(dup.text).toBe(original.text);
    // It was answered when the first finished, not after its whole wait (5 s).
    expect(dup.ended - original.ended).toBeLessThan(1_000);
    expect(await countRows(t.dataSource, 'demo_widgets', 'name = $1', ['wait-replay'])).toBe(1);
  });

  it('still answers 409 with Retry-After when the wait is up first', async () => {
    const key = randomUUID();
    const body = { name: 'wait-timeout', delay_ms: 1_500 };
    const first = post('/demo/short-wait', key, body).then((r) => r);
    await claimed(key);
    const dup = await timed(post('/demo/short-wait', key, body));
    expect(dup.status).toBe(409);
    expect(dup.json<{ code: string }>().code).toBe('idempotency_request_in_progress');
    expect(dup.headers['retry-after']).toMatch(/^\d+$/);
    // It did wait (300 ms), and not much longer.
    expect(dup.ended - dup.started).toBeGreaterThanOrEqual(250);
    expect(dup.ended - dup.started).toBeLessThan(1_400);
    expect((await first).status).toBe(201);
  });

  it('a pile-up of 99 duplicates answers with 99 replays', async () => {
    const key = randomUUID();
    const body = { name: 'wait-pileup', delay_ms: 400 };
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 100 }, () => timed(post('/demo/waiting', key, body))));
    const ms = performance.now() - started;
    console.log(`wait pile-up: ${JSON.stringify(histogram(answers))}, peak in flight ${peakConcurrency(answers)}, all answered in ${ms.toFixed(0)} ms`);
    expect(histogram(answers)).toEqual({ '201': 1, '201 replay': 99 });
    expect(new Set(answers.map((a) => a.json<{ id: string }>().id)).size).toBe(1);
    expect(await countRows(t.dataSource, 'demo_widgets', 'name = $1', ['wait-pileup'])).toBe(1);
  });
});
