import { randomUUID } from 'node:crypto';
import { IncomingMessage, Server, ServerResponse, createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsService } from 'nestjs-cls';
import { IdempotencyModule, Outbox, OutboxMessage, createIdempotencyMigrations, transactionalClsModule } from 'safe-retries';
import { openBenchDatabase } from './lib/database';
import { Percentiles, fmt, round, sleep, summarize, table } from './lib/stats';

/**
 * §12 Events out: the library's outbox and its relay, on their own (no app
 * around them). A Nest application with IdempotencyModule's outbox, whose
 * publisher POSTs each message to a receiver in this process (fetch, keep-alive,
 * the message id as Idempotency-Key); one relay, woken by LISTEN/NOTIFY.
 * - Burst: `burst` messages added at once, one per transaction, 20
 *   transactions at a time; messages relayed per second from the first
 *   delivery to the last.
 * - Steady: `rate` messages a second for `seconds`, one per transaction;
 *   commit-to-delivery latency (the receiver's arrival less the moment the
 *   adding transaction's COMMIT returned), p50/p99.
 * Every message must arrive (at least once); duplicates are counted.
 */
export interface OutboxBenchResult {
  burst: { messages: number; relayedPerSecond: number; addedPerSecond: number; duplicates: number };
  steady: { rate: number; seconds: number; messages: number; latencyMs: Percentiles; duplicates: number };
}

const ADDERS = 20;
const DELIVERY_TIMEOUT_MS = 120_000;

/** The receiver: the arrival time (ms, performance.now()) of each message id, and how many came twice. */
class Receiver {
  readonly arrivals = new Map<string, number>();
  duplicates = 0;
  private server?: Server;
  port = 0;

  async start(): Promise<void> {
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const id = String(req.headers['idempotency-key']);
      req.resume();
      req.on('end', () => {
        if (this.arrivals.has(id)) this.duplicates++;
        else this.arrivals.set(id, performance.now());
        res.writeHead(204).end();
      });
    });
    this.server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async waitFor(ids: string[]): Promise<void> {
    const deadline = Date.now() + DELIVERY_TIMEOUT_MS;
    while (ids.some((id) => !this.arrivals.has(id))) {
      if (Date.now() > deadline) throw new Error(`§12: ${ids.filter((id) => !this.arrivals.has(id)).length} of ${ids.length} messages undelivered after ${DELIVERY_TIMEOUT_MS} ms`);
      await sleep(20);
    }
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }
}

function outboxApp(databaseUrl: string, receiver: Receiver): Promise<INestApplicationContext> {
  const publish = async (message: OutboxMessage, signal: AbortSignal): Promise<void> => {
    const res = await fetch(`http://127.0.0.1:${receiver.port}/events`, {
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
      TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, migrations: createIdempotencyMigrations(), migrationsRun: true }),
      transactionalClsModule(),
      IdempotencyModule.forRoot({ outbox: { publish } }),
    ],
  })
  class OutboxBenchModule {}
  return NestFactory.createApplicationContext(OutboxBenchModule, { logger: ['error', 'warn'] });
}

export async function outboxBench(databaseUrl: string, options: { burst: number; rate: number; seconds: number; log(m: string): void }): Promise<OutboxBenchResult> {
  const receiver = new Receiver();
  await receiver.start();
  const app = await outboxApp(databaseUrl, receiver);
  await app.init();
  const outbox = app.get(Outbox);
  const txHost = app.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost);
  const cls = app.get(ClsService);
  /** Adds one message in a transaction of its own; its id and the moment its COMMIT returned. */
  const add = (n: number) =>
    cls.run(async () => {
      const id = await txHost.withTransaction(() => outbox.add({ topic: 'bench.event', payload: { n, nonce: randomUUID() } }));
      return { id, committedAt: performance.now() };
    });
  try {
    // Warm: the relay's statements prepared, the receiver's connections open.
    const warm = await Promise.all(Array.from({ length: 50 }, (_, i) => add(i)));
    await receiver.waitFor(warm.map((m) => m.id));

    const ids: string[] = [];
    const addStart = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: ADDERS }, async () => {
        while (next < options.burst) ids.push((await add(next++)).id);
      }),
    );
    const addMs = performance.now() - addStart;
    await receiver.waitFor(ids);
    const times = ids.map((id) => receiver.arrivals.get(id)!);
    const spanMs = Math.max(...times) - Math.min(...times);
    const burst = {
      messages: ids.length,
      relayedPerSecond: round(ids.length / (spanMs / 1000), 1),
      addedPerSecond: round(ids.length / (addMs / 1000), 1),
      duplicates: receiver.duplicates,
    };
    options.log(`§12 burst: ${burst.messages} messages, relayed ${burst.relayedPerSecond}/s (added ${burst.addedPerSecond}/s)`);

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
    await receiver.waitFor(sent.map((m) => m.id));
    const steady = {
      rate: options.rate,
      seconds: options.seconds,
      messages: sent.length,
      latencyMs: summarize(sent.map((m) => receiver.arrivals.get(m.id)! - m.committedAt)),
      duplicates: receiver.duplicates - duplicatesBefore,
    };
    options.log(`§12 steady: ${steady.messages} messages at ${steady.rate}/s, commit to delivery p50 ${fmt(steady.latencyMs.p50, 1)} ms, p99 ${fmt(steady.latencyMs.p99, 1)} ms`);
    return { burst, steady };
  } finally {
    await app.close();
    await receiver.stop();
  }
}

export function outboxReport(r: OutboxBenchResult): string[] {
  return [
    `§12 Events out: the outbox's relay (one instance, woken by LISTEN/NOTIFY) POSTing each message to a receiver in the bench's process`,
    table(
      ['run', 'messages', 'relayed/s', 'commit to delivery p50 / p99 ms', 'duplicates'],
      [
        [`burst (${ADDERS} adders, one message a transaction; added at ${fmt(r.burst.addedPerSecond, 0)}/s)`, r.burst.messages, fmt(r.burst.relayedPerSecond, 0), '–', r.burst.duplicates],
        [`steady (${r.steady.rate}/s for ${r.steady.seconds} s)`, r.steady.messages, '–', `${fmt(r.steady.latencyMs.p50, 1)} / ${fmt(r.steady.latencyMs.p99, 1)}`, r.steady.duplicates],
      ],
    ),
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
        log,
      });
      process.stderr.write(`${outboxReport(result).join('\n')}\n`);
      console.log(JSON.stringify(result, null, 2));
    } finally {
      await db.stop();
    }
  })();
}
