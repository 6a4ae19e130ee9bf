import { randomUUID } from 'node:crypto';
import { IncomingMessage, Server, ServerResponse, createServer, request as httpRequest } from 'node:http';
import { AddressInfo } from 'node:net';
import { Client } from 'pg';
import request from 'supertest';
import { createTestApp } from '../../support/app';
import { AppProcess, startAppProcess, startAppProcesses, stopAll } from '../../support/app-process';
import { CardNetworkProcess, networkAppEnv, startCardNetworkProcess } from '../../support/card-network';
import { TestDatabase, createTestDatabase } from '../../support/database';
import { paymentBody } from '../../support/fixtures';
import { waitFor } from '../../support/http-client';

/**
 * The refund settlement job on three real app processes, one database and one
 * card network: every instance ticks, but the fleet has one cursor (a row
 * under a lease), so the network is asked about each refund once a walk, not
 * once per instance, and a crash or a deploy goes on from the stored cursor
 * instead of from the oldest refund.
 *
 * The card network is seen through a proxy that notes every refund lookup
 * (GET /v1/refunds/{id}) and answers it 100 ms late: a walk of REFUNDS takes
 * longer than the job's interval, so instances that each walked on their own
 * would be walking at the same time. The log of lookups, in arrival order, is
 * then checked against the walk's order: the refunds in (created_at,
 * client_id, id) order, over and over. IDEMPOTENCY_LEASE=1s: the job runs
 * every 2 s and its cursor's lease lasts 4 s.
 */
jest.setTimeout(240_000);

const REFUNDS = 20;
const LOOKUP_DELAY_MS = 100;
const LOOKUP = /^\/v1\/refunds\/(re_[A-Za-z0-9]+)/;

interface LookupProxy {
  url: string;
  /** The refund ids looked up, in arrival order. */
  lookups: string[];
  close(): Promise<void>;
}

/** Forwards everything to the network; each refund lookup is noted on arrival and sent on LOOKUP_DELAY_MS later. */
async function startLookupProxy(upstream: string): Promise<LookupProxy> {
  const target = new URL(upstream);
  const lookups: string[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const lookup = req.method === 'GET' ? LOOKUP.exec(req.url ?? '') : null;
    if (lookup) lookups.push(lookup[1]);
    const forward = () => {
      const upstreamReq = httpRequest(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host }, agent: false },
        (upstreamRes) => {
          res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
          upstreamRes.pipe(res);
        },
      );
      upstreamReq.on('error', () => res.socket?.destroy());
      req.pipe(upstreamReq);
    };
    if (lookup) setTimeout(forward, LOOKUP_DELAY_MS);
    else forward();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    lookups,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** How many lookups it took until every refund had been asked about once: one walk's worth is REFUNDS. */
function lookupsUntilEachOnce(log: string[]): number {
  const asked = new Set<string>();
  for (let i = 0; i < log.length; i++) {
    asked.add(log[i]);
    if (asked.size === REFUNDS) return i + 1;
  }
  return Infinity;
}

describe('fault: three instances share the refund settlement', () => {
  let db: TestDatabase;
  let pg: Client;
  let network: CardNetworkProcess;
  let proxy: LookupProxy;
  let env: Record<string, string>;
  const apps: AppProcess[] = [];
  /** The walk's order: network refund ids, and our refund ids, in (created_at, client_id, id) order. */
  let order: string[] = [];
  let ours: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    network = await startCardNetworkProcess();
    proxy = await startLookupProxy(network.url);
    // REFUNDS succeeded refunds (each asked about by the job's second walk for 30 days), made before any instance runs the job.
    const maker = await createTestApp({ database: db, env: networkAppEnv(proxy) });
    try {
      for (let i = 0; i < REFUNDS; i++) {
        const http = () => request(maker.app.getHttpServer());
        const paid = await http().post('/payments').set(maker.auth()).set('Idempotency-Key', randomUUID()).send(paymentBody({ amount: 500 + i })).expect(201);
        await http().post(`/payments/${paid.body.id}/refunds`).set(maker.auth()).set('Idempotency-Key', randomUUID()).send({}).expect(201);
      }
    } finally {
      await maker.close();
    }
    pg = new Client({ connectionString: db.url });
    await pg.connect();
    const rows = (
      await pg.query<{ id: string; network_refund_id: string }>(
        `SELECT id, network_refund_id FROM refunds WHERE status = 'succeeded' ORDER BY created_at, client_id, id`,
      )
    ).rows;
    expect(rows).toHaveLength(REFUNDS);
    order = rows.map((r) => r.network_refund_id);
    ours = rows.map((r) => r.id);
    expect(proxy.lookups).toEqual([]);
    env = {
      DATABASE_URL: db.url,
      CARD_NETWORK_URL: proxy.url,
      CARD_NETWORK_MAX_RETRIES: '0',
      CARD_NETWORK_TIMEOUT: '2s',
      IDEMPOTENCY_JOBS: 'on',
      IDEMPOTENCY_LEASE: '1s',
    };
  });

  afterAll(async () => {
    await stopAll(apps);
    await pg?.end().catch(() => undefined);
    await proxy?.close();
    await network?.stop();
    await db?.drop();
  });

  /** The walk's order from position `from`, `n` long: what one cursor for the fleet asks, in that order. */
  const walkFrom = (from: number, n: number) => Array.from({ length: n }, (_, i) => order[(from + i) % REFUNDS]);
  const lookupsReach = (n: number) => waitFor(`${n} refund lookups`, () => proxy.lookups.length >= n, { timeoutMs: 90_000, seen: () => proxy.lookups.length });
  /** The position in the walk of the refund asked about last. */
  const lastAsked = () => order.indexOf(proxy.lookups[proxy.lookups.length - 1]);
  /** Waits until the fleet is halfway through a walk (not next to the walk's end, where the cursor goes back to the oldest). */
  const midWalk = async () => {
    const from = proxy.lookups.length;
    await waitFor('the middle of a walk', () => proxy.lookups.length > from + 1 && lastAsked() === REFUNDS / 2, { timeoutMs: 90_000, intervalMs: 5 });
  };
  /** Where the stored cursor of the succeeded walk stands (its position in the walk), and whether a lease is held. */
  async function storedCursor(): Promise<{ position: number; held: boolean }> {
    const { rows } = await pg.query<{ succeeded_id: string | null; held: boolean }>(
      'SELECT succeeded_id, holder IS NOT NULL AND lease_until > now() AS held FROM refund_settlement_cursor',
    );
    expect(rows).toHaveLength(1);
    return { position: rows[0].succeeded_id === null ? -1 : ours.indexOf(rows[0].succeeded_id), held: rows[0].held };
  }

  it('three instances ask about each refund once a walk: one walk of network reads, not three', async () => {
    await startAppProcesses([{ env }, { env }, { env }], apps);
    // Every instance is up (and ticking) from here on: three more walks of the fleet.
    const allUp = proxy.lookups.length;
    await lookupsReach(allUp + 3 * REFUNDS);
    const log = proxy.lookups.slice(0, allUp + 3 * REFUNDS);
    const untilEachOnce = lookupsUntilEachOnce(log.slice(allUp));
    console.log(
      `refund settlement, 3 instances: ${log.length - allUp} lookups while all were up for ${REFUNDS} refunds ` +
        `(each refund asked about once in the first ${untilEachOnce}; one walk is ${REFUNDS})`,
    );
    // From the first instance's first tick: the walk's order, over and over; never a refund twice in a walk.
    expect(log).toEqual(walkFrom(0, log.length));
  });

  it('after a crash of the fleet, a new instance goes on from the stored cursor once the lease has expired', async () => {
    await midWalk();
    for (const app of apps.splice(0)) app.kill('SIGKILL');
    await waitFor('the instances to exit', () => apps.every((a) => a.hasExited()));
    const atCrash = proxy.lookups.length;
    const last = lastAsked();
    const cursor = await storedCursor();
    const { rows } = await pg.query<{ left_ms: number }>('SELECT (extract(epoch FROM lease_until - now()) * 1000)::int AS left_ms FROM refund_settlement_cursor');

    const crashedAt = Date.now();
    apps.push(await startAppProcess({ env }));
    await lookupsReach(atCrash + 1);
    console.log(
      `refund settlement after a crash: lease left ${rows[0]?.left_ms} ms; a new instance asked again ${Date.now() - crashedAt} ms after the crash (its boot included), after refund ${last + 1} of ${REFUNDS}`,
    );
    await lookupsReach(atCrash + REFUNDS);
    const after = proxy.lookups.slice(atCrash, atCrash + REFUNDS);
    // The walk goes on where it was: at the refund whose answer was lost with the process, or the next one; not at the oldest.
    expect([order[last], order[(last + 1) % REFUNDS]]).toContain(after[0]);
    expect(after).toEqual(walkFrom(order.indexOf(after[0]), REFUNDS));
    // ... because that is where the stored cursor stood: past the last refund asked about, or the one before it.
    expect([last, last - 1]).toContain(cursor.position);
    expect(after[0]).toBe(order[cursor.position + 1]);
  });

  it('a deploy (the instance stopped, three new ones started) goes on from the stored cursor at once, one walk for the three', async () => {
    await midWalk();
    const [old] = apps.splice(0);
    expect(await old.stop()).toBe(0);
    const atStop = proxy.lookups.length;
    const last = lastAsked();
    const cursor = await storedCursor();

    await startAppProcesses([{ env }, { env }, { env }], apps);
    await lookupsReach(atStop + 2 * REFUNDS);
    // The next refund after the last one asked about, then the walk's order: two walks for the three.
    expect(proxy.lookups.slice(atStop, atStop + 2 * REFUNDS)).toEqual(walkFrom(last + 1, 2 * REFUNDS));
    // A stopped instance finishes the refund it is asking about, moves the cursor past it and gives the lease up.
    expect(cursor).toEqual({ position: last, held: false });
  });
});
