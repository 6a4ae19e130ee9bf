import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { TestApp, countRows, createTestApp } from '../support/app';
import { paymentBody } from '../support/fixtures';
import { peakConcurrency, timed } from '../support/race';
import { keyIn } from '../support/keys';

/**
 * Admission control of the card network routes: PAYMENTS_CONCURRENCY at once,
 * PAYMENTS_QUEUE_LIMIT waiting in order, the rest turned away with 503 before
 * any claim; other routes are not affected.
 */
describe('payments admission control (e2e)', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp({ listen: true, env: { PAYMENTS_CONCURRENCY: '2', PAYMENTS_QUEUE_LIMIT: '2', CARD_NETWORK_DELAY: '400ms' } });
  });
  afterAll(() => t.close());

  it('works on 2 at once, queues 2 in order, turns the 5th and 6th away with 503 and no claim', async () => {
    const keys = Array.from({ length: 6 }, () => randomUUID());
    const burst = keys.map((key, i) =>
      timed(request(t.url!).post('/payments').set(t.auth()).set('Idempotency-Key', key).send(paymentBody({ amount: 100 + i, description: `admit ${key}` }))),
    );
    // The rest of the API answers meanwhile.
    const health = await request(t.url!).get('/health');
    expect(health.status).toBe(200);
    const answers = await Promise.all(burst);
    expect(peakConcurrency(answers)).toBe(6);

    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([201, 201, 201, 201, 503, 503]);
    for (const refused of answers.filter((a) => a.status === 503)) {
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(refused.json<{ code: string }>().code).toBe('service_unavailable');
      expect(refused.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    }
    const refusedKeys = keys.filter((_, i) => answers[i].status === 503);
    expect(await countRows(t.dataSource, 'idempotency_keys', keyIn(), [refusedKeys])).toBe(0);
    // Two at a time: the queued ones finished a whole network delay after the first two.
    const done = answers.filter((a) => a.status === 201).map((a) => a.ended - a.started).sort((x, y) => x - y);
    expect(done[2]).toBeGreaterThan(done[0] + 300);

    // A refused request is retried with its key and runs.
    const retry = await request(t.url!).post('/payments').set(t.auth()).set('Idempotency-Key', refusedKeys[0]).send(paymentBody({ amount: 100 + keys.indexOf(refusedKeys[0]), description: `admit ${refusedKeys[0]}` }));
    expect(retry.status).toBe(201);
  });
});
