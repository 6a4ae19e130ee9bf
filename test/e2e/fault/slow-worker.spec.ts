import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { AppProcess, PROCESS_CLIENT, startAppProcesses, stopAll } from '../../support/app-process';
import { CardNetworkProcess, startCardNetworkProcess } from '../../support/card-network';
import { TestDatabase, createTestDatabase } from '../../support/database';
import { NOW_US } from '../../support/db-clock';
import { RawResponse, authHeaders, send, waitFor } from '../../support/http-client';
import { keyIs } from '../../support/keys';

/**
 * A worker's lease against its speed, with the built app as real OS processes
 * (two instances on one database), the card network as a process of its own
 * answering each call after 1 s (a payment makes two: create the intent,
 * confirm it), and a 1.5 s lease.
 *
 * - A worker slower than its lease but alive keeps it: its lease is renewed
 *   while it waits on the card network (the lease row moves forward, past the
 *   deadline its claim was given, by the database clock), so a retry after the
 *   claim's lease gets 409 idempotency_request_in_progress, never a takeover.
 *   (The network holds the original's first call until that retry has been
 *   answered, so the retry always lands while the original still works.) The
 *   original then answers 201 with the one payment and the one charge, and
 *   retries replay it.
 * - A worker frozen (SIGSTOP: a GC pause, a frozen VM) while its last call (the
 *   confirm) waits at the network renews nothing: once its lease has run out by
 *   the database clock, a retry on the other instance takes the key over, and
 *   its own confirm meets the frozen worker's in flight at the network (an
 *   unknown outcome: 503, the key kept in progress). Resumed (SIGCONT), the
 *   frozen worker has the network's answer and runs its Finish phase while the
 *   key is still in progress, so its fenced completion is refused by the token
 *   alone: it answers 409 idempotency_lease_lost and its writes roll back. The
 *   next retry takes over and completes the payment; the network holds one
 *   intent and one charge for it, and retries replay that response.
 *
 * The card network timeout (20 s) is longer than the lease (allowed since
 * leases are renewed) and than the freeze, so the frozen worker's pending call
 * is answered, not timed out, when it resumes.
 */
jest.setTimeout(120_000);

const LEASE_MS = 1_500;

interface KeyRow {
  status: number | null;
  /** The lease deadline (the fencing token), µs since the epoch, as text (int8). */
  lease: string;
  /** The database clock when the row was read, µs since the epoch, as text. */
  now: string;
}

type Outcome = { res: RawResponse } | { error: Error };

describe('fault: a slow worker keeps its lease, a frozen one loses it', () => {
  let db: TestDatabase;
  let pg: Client;
  let network: CardNetworkProcess;
  const apps: AppProcess[] = [];
  let first: AppProcess;
  let second: AppProcess;

  beforeAll(async () => {
    db = await createTestDatabase();
    pg = new Client({ connectionString: db.url });
    await pg.connect();
    network = await startCardNetworkProcess({ delay: '1s' });
    const env = {
      DATABASE_URL: db.url,
      IDEMPOTENCY_LEASE: `${LEASE_MS}ms`,
      CARD_NETWORK_URL: network.url,
      CARD_NETWORK_TIMEOUT: '20s',
      CARD_NETWORK_MAX_RETRIES: '0',
      IDEMPOTENCY_JOBS: 'off',
    };
    [first, second] = await startAppProcesses([{ env }, { env }], apps);
  });

  afterAll(async () => {
    // A stopped process keeps SIGTERM pending until it is continued (stop() would
    // wait its full timeout, then SIGKILL): continue every process first. SIGCONT
    // does nothing to a running one.
    for (const app of apps) app.kill('SIGCONT');
    await stopAll(apps);
    await network?.ledger.release().catch(() => undefined);
    await network?.stop();
    await pg?.end().catch(() => undefined);
    await db?.drop();
  });

  const pay = (app: AppProcess, key: string, body: object) =>
    send(app.url, { method: 'POST', path: '/payments', headers: authHeaders(PROCESS_CLIENT.key, key), body, timeoutMs: 30_000 });

  /** A request awaited later: never an unhandled rejection meanwhile. */
  const inFlight = (request: Promise<RawResponse>): Promise<Outcome> =>
    request.then(
      (res) => ({ res }),
      (error: Error) => ({ error }),
    );
  const response = (outcome: Outcome): RawResponse => {
    if ('error' in outcome) throw outcome.error;
    return outcome.res;
  };

  /** The key's row while it is in progress, with the database clock; undefined otherwise. */
  const inProgressRow = async (key: string): Promise<KeyRow | undefined> => {
    const { rows } = await pg.query<KeyRow>(
      `SELECT status, lease::text AS lease, ${NOW_US}::text AS now FROM idempotency_keys WHERE ${keyIs()} AND status IS NULL`,
      [key],
    );
    return rows[0];
  };

  const paymentsDescribed = async (description: string) =>
    (await pg.query<{ id: string; status: string }>('SELECT id, status FROM payments WHERE description = $1', [description])).rows;

  const storedResponse = async (key: string) =>
    (await pg.query<{ status: number | null; body: string | null }>(`SELECT status, body FROM idempotency_keys WHERE ${keyIs()}`, [key])).rows;

  const expectReplays = async (targets: AppProcess[], key: string, body: object, original: RawResponse) => {
    for (const app of targets) {
      const replay = await pay(app, key, body);
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(original.text);
    }
  };

  it('a worker slower than its lease keeps it by renewing', async () => {
    const key = randomUUID();
    const description = `slow worker ${key}`;
    const body = { amount: 2500, currency: 'usd', source: 'tok_visa', description };

    // The network holds the original's first call until the retry below has been
    // answered: the worker is as slow as the test needs (well past its lease),
    // and the retry cannot race the original's completion. Released, each call
    // still takes the network's 1 s.
    await network.ledger.hold();
    const original = inFlight(pay(first, key, body));
    try {
      // Read as soon as the row exists: `now` is then no earlier than the claim.
      const claimed = await waitFor('the original to claim the key', () => inProgressRow(key), { intervalMs: 10 });
      await waitFor('the network to hold the original create intent call', async () => (await network.ledger.held()) === 1);

      // By the database clock, the lease the claim gave has passed...
      await waitFor(
        'a lease to pass since the claim, by the database clock',
        async () => {
          const { rows } = await pg.query<{ passed: boolean }>(`SELECT ${NOW_US} >= $1::int8 + $2::int8 * 1000 AS passed`, [claimed.now, LEASE_MS]);
          return rows[0].passed;
        },
      );
      // ...and the key is still the original's: its lease moved forward (renewed)
      // and is still in the future.
      const renewed = await inProgressRow(key);
      expect(renewed).toBeDefined();
      expect(BigInt(renewed!.lease)).toBeGreaterThan(BigInt(claimed.lease));
      expect(BigInt(renewed!.lease)).toBeGreaterThan(BigInt(renewed!.now));
      expect(BigInt(renewed!.now)).toBeGreaterThanOrEqual(BigInt(claimed.now) + BigInt(LEASE_MS * 1000));

      // A retry on the other instance: in progress, not a takeover.
      const retry = await pay(second, key, body);
      expect(retry.status).toBe(409);
      expect(retry.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(retry.json()).toMatchObject({ status: 409, code: 'idempotency_request_in_progress' });
      expect(retry.headers['retry-after']).toMatch(/^\d+$/);
      expect(Number(retry.headers['retry-after'])).toBeGreaterThanOrEqual(1);

      // Still the original's, still at the network.
      const still = await inProgressRow(key);
      expect(still).toBeDefined();
      expect(BigInt(still!.lease)).toBeGreaterThan(BigInt(still!.now));
      expect(await network.ledger.held()).toBe(1);
    } finally {
      await network.ledger.release();
    }

    const done = response(await original);
    console.log(`slow-worker: the original answered ${done.status} in ${done.ms.toFixed(0)} ms (lease ${LEASE_MS} ms)`);
    expect(done.status).toBe(201);
    expect(done.headers['idempotent-replayed']).toBeUndefined();
    expect(done.ms).toBeGreaterThan(LEASE_MS);
    const payment = done.json<{ id: string }>();
    expect(payment).toMatchObject({ status: 'succeeded', amount: 2500, currency: 'usd', description });

    await expectReplays([second, first], key, body, done);

    expect(await paymentsDescribed(description)).toEqual([{ id: payment.id, status: 'succeeded' }]);
    expect(await storedResponse(key)).toEqual([{ status: 201, body: done.text }]);
    const intents = (await network.ledger.intents()).filter((i) => i.description === description);
    expect(intents.map((i) => [i.status, i.metadata.payment_id])).toEqual([['succeeded', payment.id]]);
  });

  it('a worker frozen longer than its lease loses it and can never commit', async () => {
    const [victim, standby] = [first, second];
    const key = randomUUID();
    const description = `frozen worker ${key}`;
    const body = { amount: 4200, currency: 'eur', source: 'tok_visa', description };

    let victimAnswered = false;
    const original = inFlight(pay(victim, key, body)).finally(() => {
      victimAnswered = true;
    });
    const [started] = await waitFor('the Start phase to commit (a processing payment)', async () => {
      const rows = await paymentsDescribed(description);
      return rows.length === 1 && rows[0].status === 'processing' && rows;
    });

    // Its confirm call, its last call to the network, is held there (not executed):
    // frozen now, the victim runs no timers, so it renews nothing.
    await waitFor('the victim create intent call to reach the network', async () =>
      (await network.ledger.intents()).some((i) => i.metadata.payment_id === started.id),
    );
    await network.ledger.hold();
    let taken: RawResponse;
    try {
      await waitFor('the network to hold the victim confirm call', async () => (await network.ledger.held()) === 1);
      victim.kill('SIGSTOP');
      await waitFor(
        "the frozen victim's lease to expire by the database clock",
        async () => (await pg.query(`SELECT 1 FROM idempotency_keys WHERE ${keyIs()} AND status IS NULL AND lease <= ${NOW_US}`, [key])).rowCount === 1,
        {
          intervalMs: 50,
          seen: async () => (await pg.query(`SELECT status, (lease - ${NOW_US}) / 1000 AS lease_left_ms FROM idempotency_keys WHERE ${keyIs()}`, [key])).rows,
        },
      );
      // A retry on the other instance takes the key over (a new token), resumes at the
      // recovery point and confirms the intent under the same network key: held too.
      const takeover = inFlight(pay(standby, key, body));
      await waitFor('the network to hold the takeover confirm call', async () => (await network.ledger.held()) === 2);
      // Released in arrival order: the victim's confirm takes effect (its answer comes
      // 1 s later, to a frozen process); the takeover's meets it in flight, 409
      // idempotency_key_in_use, an unknown outcome: the takeover answers 503 and
      // gives its lease up, the key still in progress at its recovery point.
      await network.ledger.release();
      taken = response(await takeover);
      expect(taken.status).toBe(503);
      expect(victimAnswered).toBe(false);
      expect(await storedResponse(key)).toEqual([{ status: null, body: null }]);
    } finally {
      await network.ledger.release();
      victim.kill('SIGCONT');
    }

    // Resumed, the victim has the network's answer (charged) and goes to its Finish
    // phase. The key is still in progress (no response stored), so only the
    // owner's token in the fenced completion can refuse it.
    const lost = response(await original);
    console.log(`slow-worker: the frozen victim answered ${lost.status} ${lost.text} in ${lost.ms.toFixed(0)} ms`);
    expect(lost.status).toBe(409);
    expect(lost.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(lost.json()).toMatchObject({ status: 409, code: 'idempotency_lease_lost' });
    expect(lost.headers['retry-after']).toMatch(/^\d+$/);
    // Its Finish rolled back: the payment is still processing, nothing stored.
    expect(await paymentsDescribed(description)).toEqual([{ id: started.id, status: 'processing' }]);
    expect(await storedResponse(key)).toEqual([{ status: null, body: null }]);

    // The next retry takes the key over again and learns the charge from the network.
    taken = await pay(standby, key, body);
    console.log(`slow-worker: the takeover answered ${taken.status} in ${taken.ms.toFixed(0)} ms`);
    expect(taken.status).toBe(201);
    expect(taken.headers['idempotent-replayed']).toBeUndefined();
    const payment = taken.json<{ id: string }>();
    expect(payment).toMatchObject({ status: 'succeeded', amount: 4200, currency: 'eur', description });
    // The takeover resumed the victim's payment (its Start had committed).
    expect(payment.id).toBe(started.id);

    // One payment, settled by the takeover; the stored response is the takeover's.
    expect(await paymentsDescribed(description)).toEqual([{ id: payment.id, status: 'succeeded' }]);
    expect(await storedResponse(key)).toEqual([{ status: 201, body: taken.text }]);
    // One intent at the network (both attempts asked with the payment's key), charged once.
    expect(await network.ledger.charges({ key: 'payment_id', value: payment.id })).toHaveLength(1);
    const intents = (await network.ledger.intents()).filter((i) => i.description === description);
    expect(intents.map((i) => [i.status, i.metadata.payment_id])).toEqual([['succeeded', payment.id]]);

    // Later retries, on either instance (the victim is alive again), replay the takeover.
    expect(victim.hasExited()).toBe(false);
    await expectReplays([standby, victim, standby], key, body, taken);
  });
});
