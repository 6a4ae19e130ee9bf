import { randomUUID } from 'node:crypto';
import { IncomingMessage, Server, ServerResponse, createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsService } from 'nestjs-cls';
import { IdempotencyModule, transactionalClsModule } from 'safe-retries';
import { idempotencyMigrations } from 'safe-retries/migrations';
import { Outbox, OutboxMessage } from 'safe-retries/outbox';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { MAX_ENDPOINTS_PER_CLIENT } from '../src/webhook-endpoints/webhook-endpoints.service';
import { cannon, startServer } from './http';
import { ClaimCost, claimCost } from './outbox-claim';
import { Tarpit } from '../test/support/tarpit';
import { BENCH_CLIENT, createStoreHarness } from './lib/app';
import { openBenchDatabase } from './lib/database';
import { ORDER, ORDER_HEADERS } from './lib/order-load';
import { SqlCounter } from './lib/sql-counter';
import { Percentiles, fmt, round, sleep, summarize, table } from './lib/stats';
import { EventsService } from '../src/events/events.service';

/**
 * §12 Events out: the library's outbox and its relay, on their own (no app
 * around them). A Nest application with IdempotencyModule's outbox, whose
 * publisher POSTs each message to a receiver in this process (fetch, keep-alive,
 * the message id as Idempotency-Key); one relay, woken by LISTEN/NOTIFY.
 * - Drain, the bench's publisher: `burst` messages queued in one transaction
 *   (one INSERT … SELECT), then drained by the relay, which the COMMIT wakes;
 *   messages relayed per second from that COMMIT to the last arrival, and the
 *   statements the bench process sends per delivery (claims and marks;
 *   bench/lib/sql-counter.ts, the queue's three among them).
 * - Drain, the app's signed webhooks: the app's server (bench/server.ts: its
 *   relay and WebhookPublisher) with 4 API clients of 5 endpoints each, each
 *   endpoint a port of the receiver's (its own origin, as clients' endpoints
 *   are), subscribed to payment.succeeded; `burst` deliveries queued in one
 *   transaction of a command-line context of the app (EventsService.record:
 *   `burst` / 20 events per client, each fanned out to its 5 endpoints), each
 *   signed per Standard Webhooks and answered 204; relayed per second as
 *   above, and the server's statements per delivery (the relay's claims and
 *   marks, the publisher's attempt begun and finished).
 * - Steady: `rate` messages a second for `seconds`, one per transaction;
 *   commit-to-delivery latency (the receiver's arrival less the moment the
 *   adding transaction's COMMIT returned), p50/p99.
 * - Beside a tarpit: 1,000 messages added in one transaction in one lane whose
 *   receiver accepts the connection and answers a byte a second (the
 *   publisher posts them to it), then `rate` / 5 messages a second for 5 s, one
 *   per transaction, each in a lane of ten others (other clients' endpoints);
 *   their commit-to-delivery latency, p50/p99, while the tarpit's lane is
 *   still in flight.
 * Every message must arrive (at least once); duplicates are counted.
 * - Payments with events on and off: the app's POST /payments (fresh keys,
 *   autocannon, 20 connections, card network without delay) in interleaved
 *   slices, with a webhook endpoint of the bench client subscribed to every
 *   event (each payment's event then goes out through the outbox, signed, to
 *   the receiver) and without one (the event is recorded, nothing is
 *   delivered). Each slice starts once the outbox has nothing left to deliver.
 * - Fan-out: the app's POST /orders, one at a time (fresh keys), while the
 *   bench client has 1 endpoint subscribed to order.created and while it has
 *   MAX_ENDPOINTS_PER_CLIENT, in interleaved slices; latency p50/p90 for each.
 *   Each order's deliveries are drained before the next order is sent, so a
 *   figure is the request's own (its transaction queues a delivery per
 *   endpoint), not the relay's work beside it.
 * - The claim on its own (outbox-claim.ts): its round trip with 5 to 5,000
 *   messages due in 1 to 500 lanes.
 */
export interface OutboxBenchResult {
  burst: DrainResult;
  signed: DrainResult & { clients: number; endpoints: number };
  steady: { rate: number; seconds: number; messages: number; latencyMs: Percentiles; duplicates: number };
  tarpit: { queued: number; rate: number; messages: number; latencyMs: Percentiles; tarpitConnections: number };
  claim: ClaimCost[];
  payments: { seconds: number; off: number[]; on: number[]; offPerSecond: number; onPerSecond: number; onOverOff: number; delivered: number };
  fanOut: { endpoints: number; latencyMs: Percentiles }[];
}

/** A drain: `messages` committed at once, relayed per second from their COMMIT to the last arrival; the relay's statements (with the publisher's) per delivery, by kind. */
export interface DrainResult {
  messages: number;
  relayedPerSecond: number;
  duplicates: number;
  statementsPerDelivery: number;
  kinds: Record<string, number>;
}

/** The signed drain's API clients (each a group of lanes) and the endpoints of each (each a lane). */
const SIGNED_CLIENTS = 4;
const SIGNED_ENDPOINTS = 5;
const DELIVERY_TIMEOUT_MS = 120_000;

/** The receiver: the arrival time (ms, performance.now()) of each message id, and how many came twice. */
class Receiver {
  readonly arrivals = new Map<string, number>();
  duplicates = 0;
  private readonly servers: Server[] = [];
  port = 0;

  async start(): Promise<void> {
    this.port = await this.listen();
  }

  /** Another port of this receiver (another origin: the app keeps connections per endpoint origin). */
  async listen(): Promise<number> {
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      // The outbox's own publisher sends Idempotency-Key; the app's webhooks, webhook-id (the event's: one per endpoint, by its path).
      const id = String(req.headers['idempotency-key'] ?? `${req.url} ${String(req.headers['webhook-id'])}`);
      req.resume();
      req.on('end', () => {
        if (this.arrivals.has(id)) this.duplicates++;
        else this.arrivals.set(id, performance.now());
        res.writeHead(204).end();
      });
    });
    server.keepAliveTimeout = 60_000;
    this.servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  }

  /**
   * A drain (DrainResult): `queue` commits its messages at once, answering
   * their ids as this receiver keys them and when the COMMIT returned;
   * `counted` counts the statements sent while its work runs.
   */
  async drain(
    queue: () => Promise<{ ids: string[]; committedAt: number }>,
    counted: (work: () => Promise<{ ids: string[]; committedAt: number }>) => Promise<{ result: { ids: string[]; committedAt: number }; statements: number; kinds: Record<string, number> }>,
    describe: (late: string[]) => Promise<string>,
  ): Promise<DrainResult> {
    const duplicatesBefore = this.duplicates;
    const { result, statements, kinds } = await counted(async () => {
      const queued = await queue();
      await this.waitFor(queued.ids, describe);
      return queued;
    });
    const n = result.ids.length;
    const lastMs = Math.max(...result.ids.map((id) => this.arrivals.get(id)!));
    return {
      messages: n,
      relayedPerSecond: round(n / ((lastMs - result.committedAt) / 1000), 1),
      duplicates: this.duplicates - duplicatesBefore,
      statementsPerDelivery: round(statements / n, 2),
      kinds: Object.fromEntries(Object.entries(kinds).map(([kind, count]) => [kind, round(count / n, 3)])),
    };
  }

  async waitFor(ids: string[], describe: (late: string[]) => Promise<string>): Promise<void> {
    const deadline = Date.now() + DELIVERY_TIMEOUT_MS;
    while (ids.some((id) => !this.arrivals.has(id))) {
      if (Date.now() > deadline) {
        const late = ids.filter((id) => !this.arrivals.has(id));
        throw new Error(`§12: ${late.length} of ${ids.length} messages undelivered after ${DELIVERY_TIMEOUT_MS} ms:\n${await describe(late)}`);
      }
      await sleep(20);
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  }
}

const TARPIT_LANE = 'bench.tarpit';

function outboxApp(databaseUrl: string, receiver: Receiver, tarpit: Tarpit): Promise<INestApplicationContext> {
  const publish = async (message: OutboxMessage, signal: AbortSignal): Promise<void> => {
    const to = (message.payload as { tarpit?: boolean }).tarpit ? tarpit.port : receiver.port;
    const res = await fetch(`http://127.0.0.1:${to}/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': message.id },
      body: JSON.stringify({ type: message.topic, data: message.payload }),
      signal,
    });
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`the receiver answered ${res.status}`);
  };
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, migrations: idempotencyMigrations(), migrationsRun: true }),
      transactionalClsModule(),
      IdempotencyModule.forRoot({ outbox: { publish } }),
    ],
  })
  class OutboxBenchModule {}
  return NestFactory.createApplicationContext(OutboxBenchModule, { logger: ['error', 'warn'] });
}

export async function outboxBench(
  databaseUrl: string,
  options: { burst: number; rate: number; seconds: number; paymentSeconds: number; slices: number; fanOutOrders: number; log(m: string): void },
): Promise<OutboxBenchResult> {
  const receiver = new Receiver();
  await receiver.start();
  // The app first: its migrations make the whole schema, the library's included.
  let payments: OutboxBenchResult['payments'];
  let fanOutLatency: OutboxBenchResult['fanOut'];
  let signed: OutboxBenchResult['signed'];
  let claim: ClaimCost[];
  try {
    payments = await paymentsWithEvents(databaseUrl, receiver, options);
    fanOutLatency = await fanOut(databaseUrl, receiver, { orders: options.fanOutOrders, slices: options.slices, log: options.log });
    signed = await signedDrain(databaseUrl, receiver, { messages: options.burst, log: options.log });
    claim = await claimCost(databaseUrl, options.log);
  } catch (error) {
    await receiver.stop();
    throw error;
  }
  const tarpit = new Tarpit();
  await tarpit.start();
  const app = await outboxApp(databaseUrl, receiver, tarpit);
  await app.init();
  const outbox = app.get(Outbox);
  const txHost = app.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost);
  const cls = app.get(ClsService);
  const dataSource = app.get(DataSource);
  const delivered = (ids: string[]) => receiver.waitFor(ids, (late) => lateMessages((text, values) => dataSource.query(text, values), late));
  /** Adds one message in a transaction of its own; its id and the moment its COMMIT returned. */
  const add = (n: number, lane?: string) =>
    cls.run(async () => {
      const id = await txHost.withTransaction(() => outbox.add({ topic: 'bench.event', payload: { n, nonce: randomUUID() }, lane }));
      return { id, committedAt: performance.now() };
    });
  try {
    // Warm: the relay's statements prepared, the receiver's connections open.
    const warm = await Promise.all(Array.from({ length: 50 }, (_, i) => add(i)));
    await delivered(warm.map((m) => m.id));

    const counter = new SqlCounter();
    counter.install();
    const burst = await receiver
      .drain(
        async () => {
          const queued = Array.from({ length: options.burst }, (_, n) => ({ topic: 'bench.event', payload: { n, nonce: randomUUID() } }));
          const ids = await cls.run(() => txHost.withTransaction(() => outbox.add(queued)));
          return { ids, committedAt: performance.now() };
        },
        (work) => counter.measure(work),
        (late) => lateMessages((text, values) => dataSource.query(text, values), late),
      )
      .finally(() => counter.uninstall());
    options.log(`§12 drain, the bench publisher: ${burst.messages} messages queued at once, relayed ${burst.relayedPerSecond}/s, ${burst.statementsPerDelivery} statements a delivery`);

    const duplicatesBefore = receiver.duplicates;
    const sent: { id: string; committedAt: number }[] = [];
    const pending: Promise<void>[] = [];
    const intervalMs = 1000 / options.rate;
    const start = performance.now();
    for (let i = 0; i < options.rate * options.seconds; i++) {
      const due = start + i * intervalMs;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      pending.push(add(i).then((m) => void sent.push(m)));
    }
    await Promise.all(pending);
    await delivered(sent.map((m) => m.id));
    const steady = {
      rate: options.rate,
      seconds: options.seconds,
      messages: sent.length,
      latencyMs: summarize(sent.map((m) => receiver.arrivals.get(m.id)! - m.committedAt)),
      duplicates: receiver.duplicates - duplicatesBefore,
    };
    options.log(`§12 steady: ${steady.messages} messages at ${steady.rate}/s, commit to delivery p50 ${fmt(steady.latencyMs.p50, 1)} ms, p99 ${fmt(steady.latencyMs.p99, 1)} ms`);
    const tarpitRun = await besideTarpit(options.rate / 5);
    return { burst, signed, steady, tarpit: tarpitRun, claim, payments, fanOut: fanOutLatency };
  } finally {
    await tarpit.close();
    await app.close();
    await receiver.stop();
  }

  /** The tarpit run (see OutboxBenchResult): `rate` messages a second for 5 s beside 1,000 queued for the tarpit. */
  async function besideTarpit(rate: number): Promise<OutboxBenchResult['tarpit']> {
    const queued = 1_000;
    await cls.run(() =>
      txHost.withTransaction(() => outbox.add(Array.from({ length: queued }, (_, n) => ({ topic: 'bench.tarpit', payload: { n, tarpit: true }, lane: TARPIT_LANE })))),
    );
    while (tarpit.open === 0) await sleep(10);
    const sent: { id: string; committedAt: number }[] = [];
    const start = performance.now();
    for (let i = 0; i < rate * 5; i++) {
      const wait = start + (i * 1000) / rate - performance.now();
      if (wait > 0) await sleep(wait);
      sent.push(await add(i, `bench.other.${i % 10}`));
    }
    await delivered(sent.map((m) => m.id));
    const result = {
      queued,
      rate,
      messages: sent.length,
      latencyMs: summarize(sent.map((m) => receiver.arrivals.get(m.id)! - m.committedAt)),
      tarpitConnections: tarpit.mostOpen,
    };
    options.log(
      `§12 beside a tarpit (${queued} queued, ${result.tarpitConnections} connections at most): ${result.messages} messages at ${rate}/s, commit to delivery p50 ${fmt(result.latencyMs.p50, 1)} ms, p99 ${fmt(result.latencyMs.p99, 1)} ms`,
    );
    // Its messages are no other run's: gone before the next.
    await dataSource.query('DELETE FROM idempotency_outbox WHERE lane = $1', [TARPIT_LANE]);
    return result;
  }
}

const API = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_CLIENT.key}` };

/** Resolves once the outbox has nothing left to deliver (looking every `pollMs`). */
async function outboxDrained(db: Client, pollMs: number): Promise<void> {
  const deadline = Date.now() + DELIVERY_TIMEOUT_MS;
  for (;;) {
    const [{ n }] = (await db.query('SELECT count(*)::int AS n FROM idempotency_outbox WHERE delivered_at IS NULL AND dead_at IS NULL')).rows as { n: number }[];
    if (n === 0) return;
    if (Date.now() > deadline) {
      const { rows } = await db.query<{ id: string }>('SELECT id FROM idempotency_outbox WHERE delivered_at IS NULL AND dead_at IS NULL');
      const query = (text: string, values: unknown[]) => db.query<LateRow>(text, values).then((r) => r.rows);
      throw new Error(`§12: ${n} outbox messages undelivered after ${DELIVERY_TIMEOUT_MS} ms:\n${await lateMessages(query, rows.map((r) => r.id))}`);
    }
    await sleep(pollMs);
  }
}

/**
 * Each message that did not arrive in time, as the outbox holds it: a line
 * with its topic, attempts, when it is next due and its last error (what a
 * lost wake-up, a claim held past its use or a backoff after an error shows).
 */
interface LateRow {
  id: string;
  topic: string;
  attempts: number;
  due_in_s: string;
  delivered: boolean;
  dead: boolean;
  last_error: string | null;
}

async function lateMessages(query: (text: string, values: unknown[]) => Promise<LateRow[]>, ids: string[]): Promise<string> {
  const rows = await query(
    `SELECT id, topic, attempts, round(extract(epoch FROM next_attempt_at - now())::numeric, 1) AS due_in_s,
            delivered_at IS NOT NULL AS delivered, dead_at IS NOT NULL AS dead, last_error
       FROM idempotency_outbox WHERE id = ANY($1::uuid[]) ORDER BY seq`,
    [ids],
  );
  const line = (r: LateRow) =>
    `  ${r.id} ${r.topic}: ${r.attempts} attempts, ${r.delivered ? 'marked delivered (never arrived)' : r.dead ? 'dead' : `due in ${r.due_in_s} s`}; last error: ${r.last_error ?? 'none'}`;
  const missing = ids.length - rows.length;
  return [...rows.map(line), ...(missing > 0 ? [`  ${missing} not in the outbox`] : [])].join('\n');
}

/** The fan-out run (see OutboxBenchResult): `orders` orders per endpoint count, over `slices` slices. */
async function fanOut(databaseUrl: string, receiver: Receiver, options: { orders: number; slices: number; log(m: string): void }): Promise<OutboxBenchResult['fanOut']> {
  const server = await startServer(databaseUrl);
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  const base = `http://127.0.0.1:${server.port}`;
  const endpoints: string[] = [];
  /** The bench client's endpoints (subscribed to order.created, delivering to the receiver), `n` of them. */
  const keep = async (n: number) => {
    while (endpoints.length > n) await fetch(`${base}/webhook-endpoints/${endpoints.pop()}`, { method: 'DELETE', headers: API });
    while (endpoints.length < n) {
      const res = await fetch(`${base}/webhook-endpoints`, {
        method: 'POST',
        headers: { ...API, 'idempotency-key': randomUUID() },
        body: JSON.stringify({ url: `http://127.0.0.1:${receiver.port}/hooks/${endpoints.length}`, event_types: ['order.created'] }),
      });
      if (res.status !== 201) throw new Error(`§12: POST /webhook-endpoints answered ${res.status}: ${await res.text()}`);
      endpoints.push(((await res.json()) as { id: string }).id);
    }
  };
  /** One order's latency (ms), its deliveries drained after. */
  const order = async (): Promise<number> => {
    const started = performance.now();
    const res = await fetch(`${base}/orders`, { method: 'POST', headers: { ...ORDER_HEADERS, 'idempotency-key': randomUUID() }, body: ORDER });
    await res.arrayBuffer();
    const ms = performance.now() - started;
    if (res.status !== 201) throw new Error(`§12: POST /orders answered ${res.status}`);
    await outboxDrained(db, 2);
    return ms;
  };
  const counts = [1, MAX_ENDPOINTS_PER_CLIENT];
  const latencies = new Map<number, number[]>(counts.map((n) => [n, []]));
  try {
    await keep(1);
    for (let i = 0; i < 20; i++) await order(); // warm
    for (let slice = 0; slice < options.slices; slice++) {
      for (const n of slice % 2 === 0 ? counts : [...counts].reverse()) {
        await keep(n);
        for (let i = 0; i < Math.ceil(options.orders / options.slices); i++) latencies.get(n)!.push(await order());
      }
    }
    await keep(0);
  } finally {
    await db.end();
    await server.stop();
  }
  const result = counts.map((n) => ({ endpoints: n, latencyMs: summarize(latencies.get(n)!) }));
  for (const r of result) options.log(`§12 fan-out: POST /orders with ${r.endpoints} endpoint(s), p50 ${fmt(r.latencyMs.p50)} ms, p90 ${fmt(r.latencyMs.p90)} ms (${r.latencyMs.n} orders)`);
  return result;
}

/**
 * The signed drain (see OutboxBenchResult): the app's server (its relay and
 * WebhookPublisher) with SIGNED_CLIENTS API clients of SIGNED_ENDPOINTS
 * endpoints each (each on a port of the receiver's own: an origin of its own,
 * as clients' endpoints are), subscribed to payment.succeeded; `messages` deliveries
 * queued in one transaction of a command-line context of the app
 * (EventsService.record, an event fanned out to its client's endpoints).
 */
async function signedDrain(databaseUrl: string, receiver: Receiver, options: { messages: number; log(m: string): void }): Promise<OutboxBenchResult['signed']> {
  const clients = Array.from({ length: SIGNED_CLIENTS }, (_, c) => ({ name: `bench-drain-${c}`, key: `sk_bench_drain_${c}_0123456789abcdef` }));
  const server = await startServer(databaseUrl, { API_KEYS: [BENCH_CLIENT, ...clients].map((c) => `${c.name}:${c.key}`).join(',') }, { countSql: true });
  const harness = await createStoreHarness(databaseUrl);
  try {
    const ids = new Map<string, string>();
    for (const [c, client] of clients.entries()) {
      for (let e = 0; e < SIGNED_ENDPOINTS; e++) {
        const port = await receiver.listen();
        const res = await fetch(`http://127.0.0.1:${server.port}/webhook-endpoints`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${client.key}`, 'idempotency-key': randomUUID() },
          body: JSON.stringify({ url: `http://127.0.0.1:${port}/drain/${c}/${e}`, event_types: ['payment.succeeded'] }),
        });
        if (res.status !== 201) throw new Error(`§12: POST /webhook-endpoints answered ${res.status}: ${await res.text()}`);
      }
      const [{ id }] = await harness.dataSource.query<{ id: string }[]>('SELECT id FROM clients WHERE name = $1', [client.name]);
      ids.set(client.name, id);
    }
    const events = harness.context.get(EventsService);
    const perClient = Math.ceil(options.messages / (SIGNED_CLIENTS * SIGNED_ENDPOINTS));
    const queue = async () => {
      await harness.cls.run(() =>
        harness.txHost.withTransaction(async () => {
          for (const [c, client] of clients.entries()) {
            for (let i = 0; i < perClient; i++) {
              await events.record(ids.get(client.name)!, 'payment.succeeded', { id: `pay_drain_${c}_${i}`, object: 'payment', amount: 1000, currency: 'usd' });
            }
          }
        }),
      );
      const committedAt = performance.now();
      // Each event goes to every endpoint of its client: the receiver keys a delivery by its endpoint's path and the event.
      const recorded = await harness.dataSource.query<{ id: string; client_id: string }[]>(
        `SELECT id, client_id FROM events WHERE client_id = ANY($1) AND type = 'payment.succeeded'`,
        [[...ids.values()]],
      );
      const index = new Map([...ids.values()].map((id, c) => [id, c]));
      const keys = recorded.flatMap((event) => Array.from({ length: SIGNED_ENDPOINTS }, (_, e) => `/drain/${index.get(event.client_id)}/${e} ${event.id}`));
      return { ids: keys, committedAt };
    };
    const drained = await receiver.drain(
      queue,
      (work) => server.countSql(work).then(({ result, sql }) => ({ result, statements: sql.statements, kinds: sql.kinds })),
      async (late) => `${late.length} deliveries: ${late.slice(0, 5).join(', ')} …`,
    );
    const result = { ...drained, clients: SIGNED_CLIENTS, endpoints: SIGNED_CLIENTS * SIGNED_ENDPOINTS };
    options.log(`§12 drain, signed webhooks: ${result.messages} deliveries queued at once, relayed ${result.relayedPerSecond}/s, ${result.statementsPerDelivery} statements a delivery`);
    return result;
  } finally {
    await harness.context.close();
    await server.stop();
  }
}

async function paymentsWithEvents(
  databaseUrl: string,
  receiver: Receiver,
  options: { paymentSeconds: number; slices: number; log(m: string): void },
): Promise<OutboxBenchResult['payments']> {
  const server = await startServer(databaseUrl);
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  const base = `http://127.0.0.1:${server.port}`;
  const drained = () => outboxDrained(db, 100);
  const result = { off: [] as number[], on: [] as number[] };
  const deliveredBefore = receiver.arrivals.size;
  try {
    await cannon(server.port, 'fresh', 2, 20, ''); // warm
    for (let slice = 0; slice < options.slices; slice++) {
      for (const mode of slice % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
        await drained();
        let endpoint: string | undefined;
        if (mode === 'on') {
          const res = await fetch(`${base}/webhook-endpoints`, {
            method: 'POST',
            headers: { ...API, 'idempotency-key': randomUUID() },
            body: JSON.stringify({ url: `http://127.0.0.1:${receiver.port}/hooks`, event_types: ['*'] }),
          });
          if (res.status !== 201) throw new Error(`§12: POST /webhook-endpoints answered ${res.status}: ${await res.text()}`);
          endpoint = ((await res.json()) as { id: string }).id;
        }
        const run = await cannon(server.port, 'fresh', options.paymentSeconds, 20, '');
        const perSecond = round((run.statusCodes['201'] ?? 0) / run.seconds, 1);
        result[mode].push(perSecond);
        options.log(`§12 payments, events ${mode}: ${perSecond}/s`);
        if (endpoint) {
          await drained();
          await fetch(`${base}/webhook-endpoints/${endpoint}`, { method: 'DELETE', headers: API });
        }
      }
    }
  } finally {
    await db.end();
    await server.stop();
  }
  const total = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const offPerSecond = round(total(result.off), 1);
  const onPerSecond = round(total(result.on), 1);
  return {
    seconds: options.paymentSeconds,
    ...result,
    offPerSecond,
    onPerSecond,
    onOverOff: round(onPerSecond / offPerSecond, 2),
    delivered: receiver.arrivals.size - deliveredBefore,
  };
}

export function outboxReport(r: OutboxBenchResult): string[] {
  return [
    `§12 Events out: the outbox's relay (one instance, woken by LISTEN/NOTIFY) POSTing each message to a receiver in the bench's process`,
    table(
      ['run', 'messages', 'relayed/s', 'commit to delivery p50 / p99 ms', 'duplicates'],
      [
        [`drain, the bench's publisher (queued in one transaction; ${fmt(r.burst.statementsPerDelivery)} statements a delivery)`, r.burst.messages, fmt(r.burst.relayedPerSecond, 0), '–', r.burst.duplicates],
        [
          `drain, the app's signed webhooks (${r.signed.clients} clients, ${r.signed.endpoints} endpoints; ${fmt(r.signed.statementsPerDelivery)} statements a delivery)`,
          r.signed.messages,
          fmt(r.signed.relayedPerSecond, 0),
          '–',
          r.signed.duplicates,
        ],
        [`steady (${r.steady.rate}/s for ${r.steady.seconds} s)`, r.steady.messages, '–', `${fmt(r.steady.latencyMs.p50, 1)} / ${fmt(r.steady.latencyMs.p99, 1)}`, r.steady.duplicates],
        [
          `beside a tarpit (${r.tarpit.queued} queued in its lane, ${r.tarpit.tarpitConnections} connections to it at most; ${r.tarpit.rate}/s in 10 other lanes for 5 s)`,
          r.tarpit.messages,
          '–',
          `${fmt(r.tarpit.latencyMs.p50, 1)} / ${fmt(r.tarpit.latencyMs.p99, 1)}`,
          '–',
        ],
      ],
    ),
    `POST /payments (fresh keys, 20 connections, ${r.payments.seconds} s slices): events off ${r.payments.off.map((x) => fmt(x, 0)).join(' · ')} (mean ${fmt(r.payments.offPerSecond, 0)}/s); ` +
      `on ${r.payments.on.map((x) => fmt(x, 0)).join(' · ')} (mean ${fmt(r.payments.onPerSecond, 0)}/s, ${r.payments.delivered} events delivered): on / off ${fmt(r.payments.onOverOff)}`,
    `POST /orders one at a time, each order's deliveries drained before the next: ` +
      r.fanOut.map((f) => `${f.endpoints} endpoint(s) p50 ${fmt(f.latencyMs.p50)} ms, p90 ${fmt(f.latencyMs.p90)} ms`).join('; ') +
      ` (${r.fanOut[0]?.latencyMs.n ?? 0} orders each)`,
    `the claim on its own (prepared, median of 60, ms; with the statistics of before the due were added): ` +
      r.claim.map((c) => `${c.due} due in ${c.lanes} lane(s) ${fmt(c.ms)} (${fmt(c.staleMs)})`).join('; '),
  ];
}

/** `npm run bench:outbox`: this section alone; the table on stderr, JSON on stdout. */
if (require.main === module) {
  void (async () => {
    const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
    const db = await openBenchDatabase(log);
    try {
      const result = await outboxBench(db.url, {
        burst: Number(process.env.BENCH_OUTBOX_BURST ?? 5_000),
        rate: Number(process.env.BENCH_OUTBOX_RATE ?? 100),
        seconds: Number(process.env.BENCH_OUTBOX_SECONDS ?? 10),
        paymentSeconds: Number(process.env.BENCH_OUTBOX_PAYMENT_SECONDS ?? 8),
        slices: Number(process.env.BENCH_OUTBOX_SLICES ?? 4),
        fanOutOrders: Number(process.env.BENCH_OUTBOX_FANOUT_ORDERS ?? 400),
        log,
      });
      process.stderr.write(`${outboxReport(result).join('\n')}\n`);
      console.log(JSON.stringify(result, null, 2));
    } finally {
      await db.stop();
    }
  })();
}
