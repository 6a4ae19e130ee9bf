import { randomUUID } from 'node:crypto';
import { CLIENT_A, TestApp, createTestApp } from '../../support/app';
import { Ledger } from '../../support/card-network';
import { RawResponse, authHeaders, send, waitFor } from '../../support/http-client';
import { NOW_US } from '../../support/db-clock';
import { keyIs } from '../../support/keys';

/**
 * A worker slower than its lease: each card network call takes 1 s and a
 * payment makes two (create the intent, confirm it), with a 1.5 s lease (one
 * call with its resends fits in it, as the boot requires; the two do not). A
 * retry after the lease takes the key over and succeeds; the slow original's
 * fenced completion matches no row, so it answers 409 idempotency_lease_lost
 * and its writes roll back. One payment, and every later retry replays it.
 */
jest.setTimeout(120_000);


describe('fault: a slow worker loses its lease', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp({ env: { IDEMPOTENCY_LEASE: '1500ms', CARD_NETWORK_DELAY: '1s', CARD_NETWORK_TIMEOUT: '1400ms', CARD_NETWORK_MAX_RETRIES: '0' }, listen: true });
  });
  afterAll(async () => {
    await t?.close();
  });

  const pay = (key: string, body: object) =>
    send(t.url!, { method: 'POST', path: '/payments', headers: authHeaders(CLIENT_A.key, key), body, timeoutMs: 30_000 });

  it('lets a retry after the lease take over; the slow original answers 409 lease_lost and rolls back', async () => {
    const key = randomUUID();
    const description = `slow worker ${key}`;
    const body = { amount: 2500, currency: 'usd', source: 'tok_visa', description };

    const original = pay(key, body);
    original.catch(() => undefined); // awaited below; never an unhandled rejection

    // The original claimed the key; wait (by the database clock) until its
    // lease has run out, while its second network call still runs.
    await waitFor('the original to claim the key', async () => {
      const { length } = await t.dataSource.query(`SELECT 1 FROM idempotency_keys WHERE ${keyIs()} AND status IS NULL`, [key]);
      return length === 1;
    });
    await waitFor('the original lease to expire', async () => {
      const [row] = await t.dataSource.query<{ expired: boolean }[]>(
        `SELECT lease <= ${NOW_US} AS expired FROM idempotency_keys WHERE ${keyIs()}`,
        [key],
      );
      return row?.expired === true;
    });

    const takeover: RawResponse = await pay(key, { ...body });
    const lost: RawResponse = await original;
    console.log(`slow-worker: takeover ${takeover.status} in ${takeover.ms.toFixed(0)} ms, original ${lost.status} in ${lost.ms.toFixed(0)} ms`);

    expect(takeover.status).toBe(201);
    expect(takeover.headers['idempotent-replayed']).toBeUndefined();
    const payment = takeover.json<{ id: string; status: string }>();
    expect(payment).toMatchObject({ status: 'succeeded', amount: 2500, description });

    expect(lost.status).toBe(409);
    expect(lost.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(lost.json()).toMatchObject({ status: 409, code: 'idempotency_lease_lost' });
    expect(lost.headers['retry-after']).toMatch(/^\d+$/);

    // Both attempts asked the network with the same key (the payment's): one charge,
    // and it is the one the takeover recorded. The original's Finish was fenced out.
    const charges = await Ledger.of(t).chargesDescribed(description);
    expect(charges.map((c) => c.metadata.payment_id)).toEqual([payment.id]);

    // One payment: the takeover resumed the original's (its Start had committed).
    const rows = await t.dataSource.query<{ id: string }[]>('SELECT id FROM payments WHERE description = $1', [description]);
    expect(rows.map((r) => r.id)).toEqual([payment.id]);
    const [stored] = await t.dataSource.query<{ status: number; body: string }[]>(
      `SELECT status, body FROM idempotency_keys WHERE ${keyIs()}`,
      [key],
    );
    expect(stored).toEqual({ status: 201, body: takeover.text });

    // Every later retry replays the takeover's payment.
    for (let i = 0; i < 3; i++) {
      const replay = await pay(key, body);
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.json<{ id: string }>().id).toBe(payment.id);
      expect(replay.text).toBe(takeover.text);
    }
    const after = await t.dataSource.query<{ n: number }[]>('SELECT count(*)::int AS n FROM payments WHERE description = $1', [description]);
    expect(after[0].n).toBe(1);
  });
});
