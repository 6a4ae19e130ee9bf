import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { TestApp, createTestApp } from '../support/app';
import { admission, countArrivals } from '../support/admission';
import { Ledger } from '../support/card-network';
import { paymentBody } from '../support/fixtures';
import { RawResponse, authHeaders, send, waitFor } from '../support/http-client';
import { SlowSocket, slowBody } from '../support/slow-socket';

const HOGS = [1, 2, 3].map((i) => ({ name: `hog-${i}`, key: `sk_test_hog_${i}_0123456789abcdef` }));
const WELL_BEHAVED = { name: 'well-behaved', key: 'sk_test_well_behaved_0123456789abcdef' };
type Client = { name: string; key: string };

/** A payment on its own connection, whose answer can be looked at before it comes. */
interface Sent {
  client: string;
  key: string;
  description: string;
  promise: Promise<RawResponse>;
  answer?: RawResponse;
}

function pay(url: string, client: Client, description: string): Sent {
  const key = randomUUID();
  const sent: Sent = {
    client: client.name,
    key,
    description,
    promise: send(url, { method: 'POST', path: '/payments', headers: authHeaders(client.key, key), body: paymentBody({ description }) }),
  };
  void sent.promise.then((answer) => (sent.answer = answer));
  return sent;
}

/**
 * The review's sequence, scaled down with its ratios (90 slots, 30 a client, a
 * queue of 1000 → 3, 1, 11): three clients hog the payment routes; a fourth,
 * well-behaved client must still get its first payment in with the next free
 * slot. The card network (1 s an answer, held while the hogs line up) tells the
 * order in which payments were admitted: a payment is created there as soon as
 * it takes its slot, and the slots free in rounds a whole payment apart.
 */
describe('payments admission fairness (e2e)', () => {
  let t: TestApp;
  let ledger: Ledger;

  beforeAll(async () => {
    t = await createTestApp({
      listen: true,
      env: {
        API_KEYS: [...HOGS, WELL_BEHAVED].map((c) => `${c.name}:${c.key}`).join(','),
        PAYMENTS_CONCURRENCY: '3',
        PAYMENTS_CONCURRENCY_PER_CLIENT: '1',
        PAYMENTS_QUEUE_LIMIT: '11',
        CARD_NETWORK_DELAY: '1s',
        // The hogs' first payments are held at the network while the rest line up.
        CARD_NETWORK_TIMEOUT: '30s',
      },
    });
    ledger = Ledger.of(t);
  });
  afterAll(() => t.close());
  // Whatever a test left (a failed one included), the next starts with the network answering and no payment in the app.
  afterEach(async () => {
    await ledger.release();
    await waitFor('the payments to drain', async () => {
      const now = await admission(t.url!);
      return now.inFlight === 0 && now.queued === 0;
    }, { timeoutMs: 60_000 });
  });

  it('payments whose body has not arrived hold no slot and no queue place: a fourth client pays at once', async () => {
    // Each hog's key is looked up once (then cached): its requests are authenticated the moment they arrive.
    for (const hog of HOGS) expect((await send(t.url!, { path: '/payments', headers: authHeaders(hog.key) })).status).toBe(200);
    const arrivals = countArrivals(t.app.getHttpServer() as Server);
    // Headers and Content-Length, then nothing: five a hog, enough to take every slot and the queue.
    const hogs: SlowSocket[] = HOGS.flatMap((hog) =>
      Array.from({ length: 5 }, () => slowBody(t.url!, { path: '/payments', headers: authHeaders(hog.key, randomUUID()), intervalMs: 3_600_000 })),
    );
    try {
      await waitFor('the hogs’ requests to reach the app', () => arrivals.count === hogs.length);
      const closed = hogs.map(() => false);
      hogs.forEach((s, i) => void s.result.then(() => (closed[i] = true)));

      const well = pay(t.url!, WELL_BEHAVED, `well-behaved ${randomUUID()}`);
      expect((await well.promise).status).toBe(201);
      // Served while every hog still holds its connection, none of them answered.
      expect(closed.filter(Boolean)).toHaveLength(0);
      expect(await admission(t.url!)).toEqual({ inFlight: 0, queued: 0 });
    } finally {
      arrivals.stop();
      for (const s of hogs) s.destroy();
    }
    await Promise.all(hogs.map((s) => s.result));
  });
});
