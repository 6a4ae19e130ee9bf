import { randomUUID } from 'node:crypto';
import { Server, createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { Client } from 'pg';
import { AppProcess, startAppProcesses, stopAll } from '../support/app-process';
import { CardNetworkProcess, startCardNetworkProcess } from '../support/card-network';
import { TestDatabase, adminUrl, createTestDatabase } from '../support/database';
import { RawResponse, authHeaders, send, waitFor } from '../support/http-client';
import { LatencyProxy, startLatencyProxy } from '../support/latency-proxy';
import { PGBOUNCER_MISSING, PgBouncer, pgbouncerBinary, startPgBouncer } from '../../packages/idempotency/test/support/pgbouncer';
import { suitesNeeding } from '../support/tool-suites';

/**
 * A burst through a transaction pooler waits its turn instead of being
 * refused: two app instances behind a real PgBouncer in transaction mode with
 * 8 server connections (each instance's pools hold up to 30 client
 * connections), 200 payments with distinct keys sent at once from four API
 * clients, each asked once (no retry): every one is answered 201 and charged
 * once.
 *
 * PostgreSQL sits 10 ms away (each way) behind a TCP proxy, as a database in
 * another zone or under load would: each statement holds its server
 * connection for a round trip, so the burst takes the database some seconds
 * to serve, longer than a pool wait of a few seconds. On loopback it would
 * take about one, and no wait would be long.
 *
 * The background works meanwhile, on the same pooler: the jobs run on both
 * instances, and every payment's `payment.succeeded` event goes to a webhook
 * endpoint through the outbox relays of both, which claim and deliver while
 * the burst is served.
 */
jest.setTimeout(300_000);

const POOL_SIZE = 8;
const BURST = 200;
const ONE_WAY_MS = 10;
/** Four API clients: at the default PAYMENTS_CONCURRENCY (90, a third per client) each instance works on 90 payments at once. */
const CLIENTS = Array.from({ length: 4 }, (_, i) => ({ name: `burst-${i}`, key: `sk_test_burst_client_${i}_0123456789abcdef` }));

/** Receives the webhooks: the distinct `webhook-id`s it was sent. */
class Receiver {
  readonly ids = new Set<string>();
  private server?: Server;

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        this.ids.add(String(req.headers['webhook-id']));
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((done) => this.server!.listen(0, '127.0.0.1', done));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks`;
  }

  close(): Promise<void> {
    return new Promise((done) => (this.server ? this.server.close(() => done()) : done()));
  }
}

suitesNeeding('PgBouncer suite', pgbouncerBinary() !== undefined, PGBOUNCER_MISSING)('a burst through PgBouncer in transaction mode (e2e)', () => {
  let proxy: LatencyProxy;
  let bouncer: PgBouncer;
  let network: CardNetworkProcess;
  let db: TestDatabase;
  let pg: Client;
  const receiver = new Receiver();
  const apps: AppProcess[] = [];

  beforeAll(async () => {
    const server = new URL(adminUrl());
    proxy = await startLatencyProxy({ host: server.hostname, port: Number(server.port) }, ONE_WAY_MS);
    bouncer = await startPgBouncer({ serverUrl: proxy.url(adminUrl()), poolSize: POOL_SIZE });
    network = await startCardNetworkProcess({ delay: '300ms' });
    db = await createTestDatabase();
    pg = new Client({ connectionString: db.url });
    await pg.connect();
    const hooks = await receiver.start();
    const env = {
      DATABASE_URL: bouncer.url(db.name),
      DATABASE_PREPARED_STATEMENTS: 'off',
      CARD_NETWORK_URL: network.url,
      // The background jobs (purge, recovery, refund settlement) run on both instances.
      IDEMPOTENCY_JOBS: 'on',
      API_KEYS: CLIENTS.map((c) => `${c.name}:${c.key}`).join(','),
      LOG_LEVEL: 'warn',
    };
    await startAppProcesses([{ env }, { env }], apps);
    for (const client of CLIENTS) {
      const endpoint = await send(apps[0].url, {
        method: 'POST',
        path: '/webhook-endpoints',
        headers: authHeaders(client.key, randomUUID()),
        body: { url: hooks, event_types: ['payment.succeeded'] },
      });
      expect(endpoint.status).toBe(201);
    }
  });

  afterAll(async () => {
    await stopAll(apps);
    await receiver.close();
    await pg?.end().catch(() => undefined);
    await db?.drop();
    await network?.stop();
    await bouncer?.stop();
    await proxy?.close();
  });

  it(`${BURST} distinct payments at once across two instances on 8 server connections: every one 201, each charged once`, async () => {
    const batch = randomUUID();
    const pay = (i: number): Promise<RawResponse> =>
      send(apps[i % 2].url, {
        method: 'POST',
        path: '/payments',
        headers: authHeaders(CLIENTS[Math.floor(i / 2) % CLIENTS.length].key, randomUUID()),
        body: { amount: 100 + i, currency: 'usd', source: 'tok_visa', description: `burst ${batch} ${i}` },
        // A guard against a hang, far past what the burst takes.
        timeoutMs: 120_000,
      });
    const { result: answers, clients, servers, waiting } = await bouncer.peak(db.name, () => Promise.all(Array.from({ length: BURST }, (_, i) => pay(i))));

    const statuses: Record<string, number> = {};
    for (const a of answers) statuses[a.status] = (statuses[a.status] ?? 0) + 1;
    const slowest = Math.max(...answers.map((a) => a.ms));
    console.log(
      `pooler burst: ${JSON.stringify(statuses)}, slowest ${Math.round(slowest)} ms; peak ${clients} client connections (${waiting} waiting) on ${servers} server connections`,
    );
    expect(answers.filter((a) => a.status !== 201).map((a) => `${a.status} ${a.text}`)).toEqual([]);
    expect(answers.every((a) => a.headers['idempotent-replayed'] === undefined)).toBe(true);
    expect(servers).toBeLessThanOrEqual(POOL_SIZE);

    const { rows } = await pg.query<{ n: number }>(`SELECT count(*)::int AS n FROM payments WHERE description LIKE $1 AND status = 'succeeded'`, [`burst ${batch} %`]);
    expect(rows[0].n).toBe(BURST);
    const charged = (await network.ledger.intents()).filter((c) => c.status === 'succeeded' && c.description?.startsWith(`burst ${batch} `));
    expect(new Set(charged.map((c) => c.description)).size).toBe(BURST);
    expect(charged).toHaveLength(BURST);

    // The relays delivered every payment's event, through the same pooler.
    await waitFor('the relays to deliver every payment.succeeded event', () => receiver.ids.size >= BURST, { timeoutMs: 120_000, intervalMs: 200 });
    expect(receiver.ids.size).toBe(BURST);
  });
});
