import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import request from 'supertest';
import { TestApp, countRows, createTestApp } from '../support/app';
import { paymentsQueue } from '../support/config';
import { Ledger } from '../support/card-network';
import { paymentBody } from '../support/fixtures';
import { admissionReads } from '../support/admission';
import { timed } from '../../packages/idempotency/test/support/race';
import { keyIn } from '../support/keys';

/**
 * Admission control of the card network routes: PAYMENTS_CONCURRENCY at once,
 * a queue limit (1000; 2 here) waiting, the rest turned away with 503 before any claim;
 * a slot or a queue place is given back however its request ends; other routes
 * are not affected. Sharing among clients: charge-admission-fairness.spec.ts.
 */
describe('payments admission control (e2e)', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp({ listen: true, env: { PAYMENTS_CONCURRENCY: '2', CARD_NETWORK_DELAY: '1s' }, config: paymentsQueue(2) });
  });
  afterAll(() => t.close());

  it('works on 2 at once, queues 2 in order, turns the 5th and 6th away with 503 and no claim', async () => {
    const keys = Array.from({ length: 6 }, () => randomUUID());
    const post = (key: string, i: number) =>
      timed(request(t.url!).post('/payments').set(t.auth()).set('Idempotency-Key', key).send(paymentBody({ amount: 100 + i, description: `admit ${key}` })));
    const admitted = keys.slice(0, 4).map(post);
    await admissionReads(t.url!, { inFlight: 2, queued: 2 });
    // The rest of the API answers meanwhile; the 5th and 6th are refused at once, before any admitted one ends.
    const health = await request(t.url!).get('/health');
    expect(health.status).toBe(200);
    const refused = await Promise.all(keys.slice(4).map((key, i) => post(key, i + 4)));
    const answers = [...(await Promise.all(admitted)), ...refused];
    expect(Math.max(...refused.map((a) => a.ended))).toBeLessThan(Math.min(...answers.slice(0, 4).map((a) => a.ended)));

    const statuses = answers.map((a) => a.status);
    expect(statuses).toEqual([201, 201, 201, 201, 503, 503]);
    for (const r of refused) {
      expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(r.json<{ code: string }>().code).toBe('service_unavailable');
      expect(r.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    }
    const refusedKeys = keys.filter((_, i) => answers[i].status === 503);
    expect(await countRows(t.dataSource, 'idempotency_keys', keyIn(), [refusedKeys])).toBe(0);

    // A refused request is retried with its key and runs.
    const retry = await request(t.url!).post('/payments').set(t.auth()).set('Idempotency-Key', refusedKeys[0]).send(paymentBody({ amount: 100 + keys.indexOf(refusedKeys[0]), description: `admit ${refusedKeys[0]}` }));
    expect(retry.status).toBe(201);
  });

  it('gives back a queue place when its client leaves, and a slot when the payment is refused after admission', async () => {
    const ledger = Ledger.of(t);
    await ledger.hold();
    const post = (body: object, key = randomUUID()) => timed(request(t.url!).post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body));
    try {
      const working = [post(paymentBody({ amount: 301 })), post(paymentBody({ amount: 302 }))];
      await admissionReads(t.url!, { inFlight: 2, queued: 0 });
      // A waiting payment whose client gives up: its place is given back and it never runs.
      const key = randomUUID();
      const payload = JSON.stringify(paymentBody({ amount: 303 }));
      const leaving = httpRequest(`${t.url!}/payments`, {
        method: 'POST',
        agent: false,
        headers: { ...t.auth(), 'Idempotency-Key': key, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) },
      });
      leaving.on('error', () => undefined);
      leaving.end(payload);
      await admissionReads(t.url!, { inFlight: 2, queued: 1 });
      leaving.destroy();
      await admissionReads(t.url!, { inFlight: 2, queued: 0 });

      await ledger.release();
      expect((await Promise.all(working)).map((r) => r.status)).toEqual([201, 201]);
      expect(await countRows(t.dataSource, 'idempotency_keys', keyIn(), [[key]])).toBe(0);
    } finally {
      await ledger.release();
    }
    // Admitted, then refused by validation: 400, and the slot is given back.
    expect((await post(paymentBody({ amount: 0 }))).status).toBe(400);
    await admissionReads(t.url!, { inFlight: 0, queued: 0 });
  });
});
