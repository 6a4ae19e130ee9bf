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
    // A guard, not a requirement: a payment may wait through a few rounds of the network's delay.
    promise: send(url, { method: 'POST', path: '/payments', headers: authHeaders(client.key, key), body: paymentBody({ description }), timeoutMs: 120_000 }),
  };
  void sent.promise.then((answer) => (sent.answer = answer));
  return sent;
}

/** These payments in the order the card network received them. */
async function networkOrder(ledger: Ledger, payments: Sent[]): Promise<Sent[]> {
  const ours = new Map(payments.map((p) => [p.description, p]));
  return (await ledger.intents())
    .reverse()
    .map((i) => ours.get(i.description ?? ''))
    .filter((p) => p !== undefined);
}

/** The first of these payments to be answered: which client's, and how. */
function firstAnswer(payments: Sent[]): Promise<{ client: string; status: number }> {
  return Promise.race(payments.map((p) => p.promise.then((r) => ({ client: p.client, status: r.status }))));
}

/**
 * The review's sequence, scaled down (90 slots, a queue of 1000 → 3, 11):
 * three clients hog the payment routes; a fourth, well-behaved client must
 * still get its first payment in with the next free slot. The card network (1 s an answer, held while the hogs line up) tells the
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
    // One hog after the other: hog-1, alone, takes every slot and queues 3; hog-2 queues 5 (its share of the
    // queue with one other client waiting: 11 / 2), hog-3 3 (11 / 3), which fills the queue.
    for (const [i, hog] of HOGS.entries()) {
      const count = [6, 5, 4][i];
      hogs.push(...Array.from({ length: count }, (_, j) => pay(t.url!, hog, `${hog.name} ${j} ${run}`)));
      await admissionReads(t.url!, [{ inFlight: 3, queued: 3 }, { inFlight: 3, queued: 8 }, { inFlight: 3, queued: 11 }][i]);
    }
    // The queue is full: hog-3's fourth is turned away.
    await waitFor('hog-3’s fourth payment to be refused', () => hogs.some((p) => p.answer));
    expect(hogs.filter((p) => p.answer).map((p) => [p.client, p.answer!.status])).toEqual([['hog-3', 503]]);

    const well = pay(t.url!, WELL_BEHAVED, `well-behaved ${run}`);
    // Its first payment is queued, not refused: the newest waiter of the longest queue, past its share (11 / 4 clients), makes room.
    const first = await firstAnswer([well, ...hogs.filter((p) => !p.answer)]);
    expect(first).toEqual({ client: 'hog-2', status: 429 });
    expect(await admission(t.url!)).toEqual({ inFlight: 3, queued: 11 });

    await ledger.release();
    const answers = await Promise.all([well, ...hogs].map((p) => p.promise));
    expect(answers[0].status).toBe(201);
    expect(answers.map((a) => a.status).sort()).toEqual([...Array(14).fill(201), 429, 503]);
    // Reached the network with the first round of freed slots: right after the three at work, ahead of ten hog payments queued before it.
    const order = await networkOrder(ledger, [well, ...hogs]);
    expect(order).toHaveLength(14);
    expect(order.indexOf(well)).toBeGreaterThanOrEqual(3);
    expect(order.indexOf(well)).toBeLessThan(6);
    // The refused and the pushed-out claimed nothing: they can be retried with their keys.
    const refused = hogs.filter((p) => p.answer!.status !== 201).map((p) => p.key);
    expect(await countRows(t.dataSource, 'idempotency_keys', keyIn(), [refused])).toBe(0);
    await admissionReads(t.url!, { inFlight: 0, queued: 0 });
  });

  it('a freed slot goes to the waiting client with the fewest at work, not to the oldest waiter', async () => {
    const run = randomUUID();
    await ledger.hold();
    const hogs: Sent[] = [];
    // hog-1, alone, takes every slot and queues 3; hog-2 and hog-3 queue 3 each (the queue keeps room).
    for (const [i, hog] of HOGS.entries()) {
      const count = [6, 3, 3][i];
      hogs.push(...Array.from({ length: count }, (_, j) => pay(t.url!, hog, `${hog.name} ${j} ${run}`)));
      await admissionReads(t.url!, { inFlight: 3, queued: 3 * (i + 1) });
    }
    const well = pay(t.url!, WELL_BEHAVED, `well-behaved ${run}`);
    await admissionReads(t.url!, { inFlight: 3, queued: 10 });

    await ledger.release();
    const answers = await Promise.all([well, ...hogs].map((p) => p.promise));
    expect(answers.map((a) => a.status)).toEqual(Array(13).fill(201));
    // Oldest-first would serve it last (13th); it goes with the first round of freed slots.
    const order = await networkOrder(ledger, [well, ...hogs]);
    expect(order).toHaveLength(13);
    expect(order.indexOf(well)).toBeGreaterThanOrEqual(3);
    expect(order.indexOf(well)).toBeLessThan(6);
    await admissionReads(t.url!, { inFlight: 0, queued: 0 });
  });
});

/**
 * Work-conserving at the default PAYMENTS_CONCURRENCY (90): a client alone
 * takes every slot; a second client that arrives meanwhile takes the slots the
 * first one's payments free, ahead of its queue, until the two hold as many.
 * The network holds the first one's payments until every request has its turn
 * (in flight at the network, counted); then rounds a whole payment apart (1 s a
 * call, two calls a payment) tell which payments each round of freed slots took.
 */
describe('payments admission, a client alone (e2e)', () => {
  let t: TestApp;
  let ledger: Ledger;
  const LONE = HOGS[0];
  const SECOND = WELL_BEHAVED;

  beforeAll(async () => {
    t = await createTestApp({
      listen: true,
      env: { API_KEYS: [LONE, SECOND].map((c) => `${c.name}:${c.key}`).join(','), CARD_NETWORK_DELAY: '1s', CARD_NETWORK_TIMEOUT: '30s' },
    });
    ledger = Ledger.of(t);
  });
  afterAll(() => t.close());
  afterEach(async () => {
    await ledger.release();
    await waitFor('the payments to drain', async () => {
      const now = await admission(t.url!);
      return now.inFlight === 0 && now.queued === 0;
    }, { timeoutMs: 60_000 });
  });

  /** Waits until each of `count` payments has a slot or a queue place (none ends while the network holds them): the gauge then. */
  async function settled(count: number): Promise<{ inFlight: number; queued: number }> {
    return waitFor(`${count} payments admitted or queued`, async () => {
      const now = await admission(t.url!);
      return now.inFlight + now.queued === count && now;
    });
  }

  it('takes every one of the 90 slots while no other client waits: 90 payments at the network at once', async () => {
    expect(t.config.payments.concurrency).toBe(90);
    const run = randomUUID();
    await ledger.hold();
    const payments = Array.from({ length: 100 }, (_, i) => pay(t.url!, LONE, `lone ${i} ${run}`));
    expect(await settled(100)).toEqual({ inFlight: 90, queued: 10 });
    // Counted where the work is: each slot's payment has reached the card network.
    await waitFor('90 calls held at the network', async () => (await ledger.held()) === 90);

    await ledger.release();
    expect((await Promise.all(payments.map((p) => p.promise))).map((a) => a.status)).toEqual(Array(100).fill(201));
  });

  it('a second client arriving while the first holds every slot takes the freed slots, ahead of the first one’s queue, until they hold as many', async () => {
    const run = randomUUID();
    await ledger.hold();
    const lone = Array.from({ length: 180 }, (_, i) => pay(t.url!, LONE, `lone ${i} ${run}`));
    expect(await settled(180)).toEqual({ inFlight: 90, queued: 90 });
    const second = Array.from({ length: 60 }, (_, i) => pay(t.url!, SECOND, `second ${i} ${run}`));
    expect(await settled(240)).toEqual({ inFlight: 90, queued: 150 });

    await ledger.release();
    const answers = await Promise.all([...lone, ...second].map((p) => p.promise));
    expect(answers.map((a) => a.status)).toEqual(Array(240).fill(201));
    // Round 1: the first client's 90. Round 2: the 90 slots they free, shared: 45 each (the
    // second client takes every freed slot while it holds fewer), though 90 of the first
    // client's waited longer. Round 3: what is left of both.
    const order = (await networkOrder(ledger, [...lone, ...second])).map((p) => p.client);
    expect(order).toHaveLength(240);
    const count = (round: string[], client: string) => round.filter((c) => c === client).length;
    expect(count(order.slice(0, 90), LONE.name)).toBe(90);
    expect(count(order.slice(90, 180), SECOND.name)).toBe(45);
    expect(count(order.slice(180), SECOND.name)).toBe(15);
  });
});
