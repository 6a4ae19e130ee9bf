import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { CLIENT_A, CLIENT_B, TestApp, countRows, createTestApp } from '../support/app';
import { admission, admissionReads, countArrivals } from '../support/admission';
import { paymentsQueue, requestTimeout } from '../support/config';
import { paymentBody } from '../support/fixtures';
import { RawResponse, authHeaders, send, waitFor } from '../support/http-client';
import { keyIn } from '../support/keys';
import { SlowSocket, bodyOf, slowBody } from '../support/slow-socket';

const pay = (url: string, client: { key: string }, body: Record<string, unknown> = paymentBody(), key = randomUUID()): Promise<RawResponse> =>
  send(url, { method: 'POST', path: '/payments', headers: authHeaders(client.key, key), body });

/**
 * Slow and unauthenticated clients cannot stall the payments of others: a charge
 * route is authenticated before its body is read and takes a slot only once the
 * body has arrived, a client whose payments hold every slot leaves another a
 * queue place and the slots that free next,
 * and a body that does not arrive within the request timeout is answered 408.
 */
describe('slow clients (e2e)', () => {
  describe('slow bodies, a request timeout of 2 s', () => {
    let t: TestApp;
    const sockets: SlowSocket[] = [];

    beforeAll(async () => {
      t = await createTestApp({ listen: true, env: { PAYMENTS_CONCURRENCY: '4' }, config: requestTimeout(2_000) });
    });
    afterAll(async () => {
      for (const s of sockets) s.destroy();
      await t.close();
    });

    it('a flood of keyless slow bodies: each is answered and closed, nothing claimed, a valid client keeps paying', async () => {
      const floodKeys = Array.from({ length: 150 }, () => randomUUID());
      const charges = floodKeys.map((key) => slowBody(t.url!, { path: '/payments', headers: { 'Idempotency-Key': key } }));
      // Every route that needs a key is authenticated before its body is read, not only the charge routes.
      const orders = Array.from({ length: 20 }, () => slowBody(t.url!, { path: '/orders', headers: { 'Idempotency-Key': randomUUID() } }));
      sockets.push(...charges, ...orders);

      for (let i = 0; i < 10; i++) {
        const res = await pay(t.url!, CLIENT_A, paymentBody({ amount: 100 + i }));
        expect(res.status).toBe(201);
      }

      const answered = await Promise.all([...charges, ...orders].map((s) => s.result));
      for (const r of answered) {
        expect(r.status).toBe(401);
        expect(r.text).toMatch(/content-type: application\/problem\+json/i);
        expect(bodyOf(r.text).code).toBe('unauthorized');
      }
      expect(await countRows(t.dataSource, 'idempotency_keys', keyIn(), [floodKeys])).toBe(0);
      expect(await admission(t.url!)).toEqual({ inFlight: 0, queued: 0 });
    });

    it('authenticated slow bodies take no slot: the same client pays meanwhile; they get 408, no key claimed', async () => {
      // As many as the slots (4): its payments would wait for them if they took any.
      const keys = [0, 1, 2, 3].map(() => randomUUID());
      const arrivals = countArrivals(t.app.getHttpServer() as Server);
      const slow = keys.map((key) => slowBody(t.url!, { path: '/payments', headers: authHeaders(CLIENT_A.key, key) }));
      sockets.push(...slow);
      await waitFor('the slow bodies to reach the app', () => arrivals.count === slow.length).finally(() => arrivals.stop());
      expect(await admission(t.url!)).toEqual({ inFlight: 0, queued: 0 });

      const paid = await Promise.all([pay(t.url!, CLIENT_A), pay(t.url!, CLIENT_A)]);
      expect(paid.map((r) => r.status)).toEqual([201, 201]);
      const results = await Promise.all(slow.map((s) => s.result));
      expect(Math.max(...paid.map((r) => r.ended))).toBeLessThan(Math.min(...results.map((r) => r.closed)));
      for (const r of results) {
        expect(r.status).toBe(408);
        expect(bodyOf(r.text)).toMatchObject({ status: 408, code: 'request_timeout' });
      }
      expect(await countRows(t.dataSource, 'idempotency_keys', keyIn(), [keys])).toBe(0);
      expect(await admission(t.url!)).toEqual({ inFlight: 0, queued: 0 });
    });
  });

  describe('a client whose payments hang, PAYMENTS_CONCURRENCY=4, a queue of 4', () => {
    let t: TestApp;

    beforeAll(async () => {
      t = await createTestApp({
        listen: true,
        env: {
          PAYMENTS_CONCURRENCY: '4',
          CARD_NETWORK_TIMEOUT: '2s',
          CARD_NETWORK_MAX_RETRIES: '0',
          IDEMPOTENCY_LEASE: '10s',
        },
        config: paymentsQueue(4),
      });
    });
    afterAll(() => t.close());

    it('takes every slot while alone and fills the queue; another client still gets a queue place and is served', async () => {
      const hanging = [0, 1, 2, 3].map((i) => pay(t.url!, CLIENT_A, paymentBody({ source: 'tok_chargeThenHang', amount: 200 + i })));
      // Alone, A may take every slot.
      await admissionReads(t.url!, { inFlight: 4, queued: 0 });
      // Alone in the queue, A may fill it; past it, A is refused at once.
      const queued = [0, 1, 2, 3].map(() => pay(t.url!, CLIENT_A));
      await admissionReads(t.url!, { inFlight: 4, queued: 4 });
      const refused = await pay(t.url!, CLIENT_A);
      expect(refused.status).toBe(503);
      expect(refused.headers['retry-after']).toMatch(/^[1-9]\d*$/);

      // B is under its share of the full queue (4 / 2 clients): it takes the place of A's newest waiter, refused with 429.
      const b = pay(t.url!, CLIENT_B);
      const pushedOut = await Promise.race(queued);
      expect(pushedOut.status).toBe(429);
      expect(await admission(t.url!)).toEqual({ inFlight: 4, queued: 4 });

      // B is served with the slots A's payments free when they time out.
      const answers = await Promise.all(hanging);
      expect((await b).status).toBe(201);
      expect(Math.max(refused.ended, pushedOut.ended)).toBeLessThan(Math.min(...answers.map((a) => a.ended)));
      expect((await Promise.all(queued)).map((r) => r.status).sort()).toEqual([201, 201, 201, 429]);
      await admissionReads(t.url!, { inFlight: 0, queued: 0 });
    });
  });

  describe('PAYMENTS_CONCURRENCY=1', () => {
    let t: TestApp;

    beforeAll(async () => {
      t = await createTestApp({
        listen: true,
        env: { PAYMENTS_CONCURRENCY: '1', CARD_NETWORK_TIMEOUT: '2s', CARD_NETWORK_MAX_RETRIES: '0', IDEMPOTENCY_LEASE: '10s' },
      });
    });
    afterAll(() => t.close());

    it('a request without a valid key never takes or waits for a slot: 401 while the one slot is held', async () => {
      const hanging = pay(t.url!, CLIENT_A, paymentBody({ source: 'tok_chargeThenHang' }));
      await admissionReads(t.url!, { inFlight: 1, queued: 0 });

      const keyless = await send(t.url!, { method: 'POST', path: '/payments', headers: { 'Idempotency-Key': randomUUID() }, body: paymentBody() });
      const unknown = await pay(t.url!, { key: 'sk_test_unknown_0123456789abcdef' });
      for (const r of [keyless, unknown]) {
        expect(r.status).toBe(401);
        expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(r.headers['www-authenticate']).toBe('Bearer');
        expect(r.json<{ code: string }>().code).toBe('unauthorized');
      }
      expect(await admission(t.url!)).toEqual({ inFlight: 1, queued: 0 });

      // A valid client's payment does wait for the slot.
      const waiting = pay(t.url!, CLIENT_B);
      await admissionReads(t.url!, { inFlight: 1, queued: 1 });
      const held = await hanging;
      expect(unknown.ended).toBeLessThan(held.ended);
      expect((await waiting).status).toBe(201);
    });
  });
});
