import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { AppProcess, PROCESS_CLIENT, startAppProcess, startAppProcesses, stopAll } from '../../support/app-process';
import { CardNetworkProcess, startCardNetworkProcess } from '../../support/card-network';
import { TestDatabase, createTestDatabase } from '../../support/database';
import { NOW_US } from '../../support/db-clock';
import { authHeaders, send, waitFor } from '../../support/http-client';
import { keyIs } from '../../support/keys';

/**
 * A process SIGKILLed in the middle of a handler (after the claim, before the
 * commit) leaves an in-progress key and no payment. Retries fence on it: inside
 * the lease 409 + Retry-After, after the lease a process started after the crash
 * takes the key over and runs the request once, later retries replay it.
 *
 * Every process runs with IDEMPOTENCY_LEASE=3s. The retry "inside the lease" goes
 * to a second instance already running beside the victim, so it lands milliseconds
 * after the crash: a boot takes 1 to 5 s on a loaded 2-core machine, so a retry
 * that waited for a fresh process could miss a 3 s lease (a flaky test). The
 * process started after the crash does the takeover and the replay.
 */
jest.setTimeout(120_000);

const LEASE = '3s';

describe('fault: the app process crashes mid-request', () => {
  let db: TestDatabase;
  let pg: Client;
  const apps: AppProcess[] = [];
  let network: CardNetworkProcess | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
    pg = new Client({ connectionString: db.url });
    await pg.connect();
  });
  afterAll(async () => {
    await stopAll(apps);
    await network?.stop();
    await pg?.end().catch(() => undefined);
    await db?.drop();
  });

  it('leaves an in-progress key that fences retries with 409, then runs once after the lease and replays', async () => {
    // The card network outlives the app: a process of its own, answering after 1 s
    // (one call, no resends, fits in the lease, as the boot requires).
    network = await startCardNetworkProcess({ delay: '1s' });
    const env = {
      DATABASE_URL: db.url,
      IDEMPOTENCY_LEASE: LEASE,
      CARD_NETWORK_TIMEOUT: '2s',
      CARD_NETWORK_MAX_RETRIES: '0',
      CARD_NETWORK_URL: network.url,
      IDEMPOTENCY_JOBS: 'off',
    };
    const [victim, standby] = await startAppProcesses([{ env }, { env }], apps);

    const key = randomUUID();
    const description = `crash ${key}`;
    const body = { amount: 777, currency: 'eur', source: 'tok_visa', description };
    const pay = (url: string) =>
      send(url, { method: 'POST', path: '/payments', headers: authHeaders(PROCESS_CLIENT.key, key), body, timeoutMs: 30_000 });

    // The original request: claimed, started, then waiting on the 1 s card network call.
    const inFlight = pay(victim.url).then(
      (res) => ({ res }),
      (error: Error) => ({ error }),
    );
    await waitFor('the Start phase to commit (a processing payment)', async () => {
      const { rows } = await pg.query('SELECT status FROM payments WHERE description = $1', [description]);
      return rows.length === 1 && rows[0].status === 'processing';
    });
    victim.kill('SIGKILL');
    expect(await victim.exited).toBeNull(); // ended by the signal, no exit code

    const lost = await inFlight;
    expect('error' in lost ? lost.error.message : `got HTTP ${lost.res.status}`).toMatch(/socket hang up|ECONNRESET/);

    // Inside the lease: 409 in progress with Retry-After, and still nothing committed.
    const early = await pay(standby.url);
    expect(early.status).toBe(409);
    expect(early.json()).toMatchObject({ status: 409, code: 'idempotency_request_in_progress' });
    expect(early.headers['retry-after']).toMatch(/^\d+$/);
    const retryAfter = Number(early.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(3);
    const orphan = await pg.query<{ status: number | null; remaining_ms: number }>(
      `SELECT status, ((lease - ${NOW_US}) / 1000)::int AS remaining_ms FROM idempotency_keys WHERE ${keyIs()}`,
      [key],
    );
    expect(orphan.rows).toHaveLength(1);
    expect(orphan.rows[0].status).toBeNull();
    // The Start phase had committed: the payment is processing, the charge asked for.
    const started = await pg.query<{ id: string; status: string }>('SELECT id, status FROM payments WHERE description = $1', [description]);
    expect(started.rows).toEqual([{ id: expect.any(String), status: 'processing' }]);

    // A new process on the same database, started after the crash.
    const restartedAt = Date.now();
    const fresh = await startAppProcess({ env });
    apps.push(fresh);
    console.log(`crash: lease left after the crash ${orphan.rows[0].remaining_ms} ms; new process up in ${Date.now() - restartedAt} ms`);

    // After the lease (judged by the database clock): the retry takes over and runs once.
    await waitFor(
      'the crashed owner lease to expire',
      async () => (await pg.query(`SELECT 1 FROM idempotency_keys WHERE ${keyIs()} AND lease <= ${NOW_US}`, [key])).rowCount === 1,
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    const taken = await pay(fresh.url);
    expect(taken.status).toBe(201);
    expect(taken.headers['idempotent-replayed']).toBeUndefined();
    const payment = taken.json<{ id: string }>();
    expect(payment).toMatchObject({ status: 'succeeded', amount: 777, currency: 'eur', description });

    // Further retries, on either live process, replay it.
    for (const app of [fresh, standby]) {
      const replay = await pay(app.url);
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.json<{ id: string }>().id).toBe(payment.id);
      expect(replay.text).toBe(taken.text);
    }

    // The resumed attempt finished the same payment, and the card was charged once.
    expect(payment.id).toBe(started.rows[0].id);
    const { rows } = await pg.query<{ id: string }>('SELECT id FROM payments WHERE description = $1', [description]);
    expect(rows.map((r) => r.id)).toEqual([payment.id]);
    expect(await network.ledger.charges({ key: 'payment_id', value: payment.id })).toHaveLength(1);
    const stored = await pg.query(`SELECT status FROM idempotency_keys WHERE ${keyIs()}`, [key]);
    expect(stored.rows).toEqual([{ status: 201 }]);
  });
});
