import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { TestApp, countRows, createTestApp } from '../support/app';
import { paymentsQueue } from '../support/config';
import { admission, admissionReads, countArrivals } from '../support/admission';
import { Ledger } from '../support/card-network';
import { paymentBody } from '../support/fixtures';
import { RawResponse, authHeaders, send, waitFor } from '../support/http-client';
import { keyIn } from '../support/keys';
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

/** The first of these payments to be answered: which client's, and how. */
function firstAnswer(payments: Sent[]): Promise<{ client: string; status: number }> {
  return Promise.race(payments.map((p) => p.promise.then((r) => ({ client: p.client, status: r.status }))));
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
        // One slot a client (a third of 3).
        PAYMENTS_CONCURRENCY: '3',
        CARD_NETWORK_DELAY: '1s',
        // The hogs' first payments are held at the network while the rest line up.
        CARD_NETWORK_TIMEOUT: '30s',
      },
      config: paymentsQueue(11),
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

  /** This run's payments in the order the card network received them. */
  async function networkOrder(payments: Sent[]): Promise<string[]> {
    const ours = new Set(payments.map((p) => p.description));
    return (await ledger.intents())
      .reverse()
      .map((i) => i.description ?? '')
      .filter((d) => ours.has(d));
  }

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

  it('three clients filling the queue cannot keep out a fourth: its first payment takes a hog’s place and the next free slot', async () => {
    const run = randomUUID();
    await ledger.hold();
    const hogs: Sent[] = [];
    // One hog after the other, five payments each: one at work, the others queued while there is room.
    for (const [i, hog] of HOGS.entries()) {
      hogs.push(...Array.from({ length: 5 }, (_, j) => pay(t.url!, hog, `${hog.name} ${j} ${run}`)));
      await admissionReads(t.url!, [{ inFlight: 1, queued: 4 }, { inFlight: 2, queued: 8 }, { inFlight: 3, queued: 11 }][i]);
    }
    // The queue is full: hog-3's fifth is turned away.
    await waitFor('hog-3’s fifth payment to be refused', () => hogs.some((p) => p.answer));
    expect(hogs.filter((p) => p.answer).map((p) => [p.client, p.answer!.status])).toEqual([['hog-3', 503]]);

    const well = pay(t.url!, WELL_BEHAVED, `well-behaved ${run}`);
    // Its first payment is queued, not refused: the newest waiter of a hog past its share (11 / 4 clients) makes room.
    const first = await firstAnswer([well, ...hogs.filter((p) => !p.answer)]);
    expect(first).toEqual({ client: expect.stringMatching(/^hog-[12]$/), status: 429 });
    expect(await admission(t.url!)).toEqual({ inFlight: 3, queued: 11 });

    await ledger.release();
    const answers = await Promise.all([well, ...hogs].map((p) => p.promise));
    expect(answers[0].status).toBe(201);
    expect(answers.map((a) => a.status).sort()).toEqual([...Array(14).fill(201), 429, 503]);
    // Reached the network with the first slot that freed: right after the three at work, ahead of ten hog payments queued before it.
    const order = await networkOrder([well, ...hogs]);
    expect(order).toHaveLength(14);
    expect(order.indexOf(well.description)).toBeGreaterThanOrEqual(3);
    expect(order.indexOf(well.description)).toBeLessThan(6);
    // The refused and the pushed-out claimed nothing: they can be retried with their keys.
    const refused = hogs.filter((p) => p.answer!.status !== 201).map((p) => p.key);
    expect(await countRows(t.dataSource, 'idempotency_keys', keyIn(), [refused])).toBe(0);
    await admissionReads(t.url!, { inFlight: 0, queued: 0 });
  });

  it('a freed slot goes to the waiting client with the fewest at work, not to the oldest waiter', async () => {
    const run = randomUUID();
    await ledger.hold();
    const hogs: Sent[] = [];
    // Four payments a hog: one at work, three queued (the queue keeps room).
    for (const [i, hog] of HOGS.entries()) {
      hogs.push(...Array.from({ length: 4 }, (_, j) => pay(t.url!, hog, `${hog.name} ${j} ${run}`)));
      await admissionReads(t.url!, { inFlight: i + 1, queued: 3 * (i + 1) });
    }
    const well = pay(t.url!, WELL_BEHAVED, `well-behaved ${run}`);
    await admissionReads(t.url!, { inFlight: 3, queued: 10 });

    await ledger.release();
    const answers = await Promise.all([well, ...hogs].map((p) => p.promise));
    expect(answers.map((a) => a.status)).toEqual(Array(13).fill(201));
    // Oldest-first would serve it last (13th); it goes with the first slot that frees.
    const order = await networkOrder([well, ...hogs]);
    expect(order).toHaveLength(13);
    expect(order.indexOf(well.description)).toBeGreaterThanOrEqual(3);
    expect(order.indexOf(well.description)).toBeLessThan(6);
    await admissionReads(t.url!, { inFlight: 0, queued: 0 });
  });
});
