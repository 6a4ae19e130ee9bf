import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { AppProcess, PROCESS_CLIENT, startAppProcess, stopAll } from '../../support/app-process';
import { CardNetworkProcess, startCardNetworkProcess } from '../../support/card-network';
import { TestDatabase, createTestDatabase } from '../../support/database';
import { FaultProxy, startFaultProxy } from '../../support/fault-proxy';
import { authHeaders, send, waitFor } from '../../support/http-client';
import { keyIs } from '../../support/keys';

/**
 * The crash matrix of a phased payment. The app is a real process killed with
 * SIGKILL, the card network a process of its own (its ledger outlives the app):
 *   (a) after Start commits, before the network executed the charge (held there);
 *   (b) during the network call, after the network recorded the charge;
 *   (c) after Finish commits, the response lost on its way to the client.
 * Each with (i) the client retrying after the crash, and (ii) no retry at all,
 * where the recovery job of a new process drives the operation to its end.
 * After each: one charge at the network, the network's succeeded charges equal
 * our succeeded payments, the order paid once, and a retry replays the outcome.
 */
jest.setTimeout(180_000);

const LEASE = '2s';
type Point = 'a' | 'b' | 'c';
type Mode = 'retry' | 'recovery';

describe('fault: crash matrix of a phased payment', () => {
  let db: TestDatabase;
  let pg: Client;
  let network: CardNetworkProcess;
  const apps: AppProcess[] = [];
  const results: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    pg = new Client({ connectionString: db.url });
    await pg.connect();
    network = await startCardNetworkProcess();
  });
  afterAll(async () => {
    console.log(`crash matrix:\n  ${results.join('\n  ')}`);
    await stopAll(apps);
    await network?.stop();
    await pg?.end().catch(() => undefined);
    await db?.drop();
  });

  const env = (recovery: boolean) => ({
    DATABASE_URL: db.url,
    CARD_NETWORK_URL: network.url,
    IDEMPOTENCY_LEASE: LEASE,
    // One call with its resends (3 × 600 ms) stays within the lease, as the boot requires.
    CARD_NETWORK_TIMEOUT: '600ms',
    // The recovery job (every two leases) only where the mode asks for it.
    IDEMPOTENCY_JOBS: recovery ? 'on' : 'off',
  });

  async function start(recovery: boolean): Promise<AppProcess> {
    const app = await startAppProcess({ env: env(recovery) });
    apps.push(app);
    return app;
  }

  /** Reconciliation: the network's succeeded charges are exactly our succeeded payments. */
  async function reconcile(): Promise<void> {
    const charges = await network.ledger.charges();
    const { rows } = await pg.query<{ id: string; network_charge_id: string }>(
      `SELECT id::text, network_charge_id FROM payments WHERE status = 'succeeded' ORDER BY id`,
    );
    expect(charges.map((c) => [c.metadata.payment_id, c.id]).sort()).toEqual(rows.map((r) => [r.id, r.network_charge_id]).sort());
  }

  it.each<[Point, Mode]>([
    ['a', 'retry'],
    ['a', 'recovery'],
    ['b', 'retry'],
    ['b', 'recovery'],
    ['c', 'retry'],
    ['c', 'recovery'],
  ])('crash at (%s), then %s: one charge, recorded once, the order paid once, a retry replays', async (point, mode) => {
    const victim = await start(false);
    const order = (
      await send(victim.url, {
        method: 'POST',
        path: '/orders',
        headers: authHeaders(PROCESS_CLIENT.key, randomUUID()),
        body: { currency: 'usd', items: [{ sku: 'crash', quantity: 1, unit_amount: 4200 }] },
      })
    ).json<{ id: string }>();
    const key = randomUUID();
    const description = `crash ${point} ${mode} ${key}`;
    // (b): the charge itself (the confirm) is recorded at the network and its answer never comes.
    const source = point === 'b' ? 'tok_chargeThenHang' : 'tok_visa';
    const body = { amount: 4200, currency: 'usd', source, order_id: order.id, description };
    const pay = (url: string) => send(url, { method: 'POST', path: '/payments', headers: authHeaders(PROCESS_CLIENT.key, key), body, timeoutMs: 20_000 });
    const paymentRow = async () =>
      (await pg.query<{ id: string; status: string }>('SELECT id::text, status FROM payments WHERE description = $1', [description])).rows;

    let proxy: FaultProxy | undefined;
    if (point === 'a') await network.ledger.hold();
    if (point === 'c') {
      proxy = await startFaultProxy(victim.url);
      proxy.plan('drop-response');
    }
    const first = pay(proxy?.url ?? victim.url).then(
      (res) => `HTTP ${res.status}`,
      () => 'no answer',
    );

    if (point === 'a') {
      await waitFor('Start committed and the charge held at the network', async () => (await paymentRow()).length === 1 && (await network.ledger.held()) === 1);
    } else if (point === 'b') {
      await waitFor('the network recorded the charge', async () => (await network.ledger.chargesDescribed(description)).length === 1);
    } else {
      await waitFor('the app answered (Finish committed)', () => proxy!.seen.some((s) => s.upstreamStatus === 201));
    }
    victim.kill('SIGKILL');
    await victim.exited;
    expect(await first).toBe('no answer');
    await proxy?.close();
    if (point === 'a') {
      // The held request died with its caller: the network never executed it.
      await network.ledger.releaseLost();
      expect(await network.ledger.chargesDescribed(description)).toHaveLength(0);
    }
    expect((await paymentRow())[0]?.status).toBe(point === 'c' ? 'succeeded' : 'processing');

    const fresh = await start(mode === 'recovery');
    let outcome;
    if (mode === 'retry') {
      // 409 while the dead owner's lease lasts, then the retry resumes (or replays, in c).
      outcome = await waitFor('the retry to get its outcome', async () => {
        const res = await pay(fresh.url);
        return res.status === 409 ? undefined : res;
      }, { timeoutMs: 15_000, intervalMs: 250 });
      expect(outcome.status).toBe(201);
      expect(outcome.headers['idempotent-replayed']).toBe(point === 'c' ? 'true' : undefined);
    } else {
      await waitFor('the recovery job to finish the operation', async () => {
        const { rows } = await pg.query(`SELECT status FROM idempotency_keys WHERE ${keyIs()}`, [key]);
        return rows[0]?.status === 201;
      }, { timeoutMs: 15_000, intervalMs: 100 });
    }

    const replay = await pay(fresh.url);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    if (outcome) expect(replay.text).toBe(outcome.text);
    const payments = await paymentRow();
    expect(payments).toEqual([{ id: replay.json<{ id: string }>().id, status: 'succeeded' }]);
    expect(await network.ledger.chargesDescribed(description)).toHaveLength(1);
    const orderNow = await send(fresh.url, { path: `/orders/${order.id}`, headers: authHeaders(PROCESS_CLIENT.key) });
    expect(orderNow.json<{ status: string }>().status).toBe('paid');
    expect((await pg.query(`SELECT 1 FROM payments WHERE order_id = $1 AND status = 'succeeded'`, [order.id])).rowCount).toBe(1);
    await reconcile();
    results.push(`(${point}) ${mode}: one charge, payment ${payments[0].id} succeeded, replay 201`);
    await fresh.stop();
  });
});
