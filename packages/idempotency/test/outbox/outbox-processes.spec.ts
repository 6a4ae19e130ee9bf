import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { IncomingMessage, Server, ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { DataSource } from 'typeorm';
import { IdempotencyModule, Outbox } from '../../src';
import { startPgBouncer } from '../../../../test/support/pgbouncer';
import { createDatabase } from '../support/test-services';

/**
 * The outbox with real processes: relays are OS processes of their own (the
 * built library, support/outbox-process.js) that deliver to a real HTTP
 * receiver in this process, which deduplicates by the message id (the
 * Idempotency-Key its sender gives). Messages are added by an app of the
 * library in this process, each in a transaction of its own.
 */

const PACKAGE = resolve(__dirname, '../..');
const CHILD = resolve(__dirname, '../support/outbox-process.js');

interface Delivery {
  id: string;
  pid: string;
  stream: string | null;
  attempt: number;
  answer: 'ok' | 'fail' | 'hold';
}

/** The receiver: its effect happens once per message id, however often the message arrives. */
class Receiver {
  readonly deliveries: Delivery[] = [];
  readonly effects = new Map<string, number>();
  answer: (d: Delivery) => 'ok' | 'fail' | 'hold' = () => 'ok';
  readonly held: ServerResponse[] = [];
  private onDelivery?: (d: Delivery) => void;
  private readonly server: Server = createServer((req, res) => void this.receive(req, res));
  url = '';

  async start(): Promise<void> {
    await new Promise<void>((done) => this.server.listen(0, '127.0.0.1', done));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/events`;
  }

  async close(): Promise<void> {
    for (const res of this.held) res.destroy();
    this.server.closeAllConnections();
    await new Promise((done) => this.server.close(done));
  }

  /** The next delivery that matches. */
  next(match: (d: Delivery) => boolean): Promise<Delivery> {
    return new Promise((done) => {
      this.onDelivery = (d) => {
        if (match(d)) done(d);
      };
    });
  }

  of(id: string): Delivery[] {
    return this.deliveries.filter((d) => d.id === id);
  }

  private async receive(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let text = '';
    for await (const chunk of req) text += String(chunk);
    const body = JSON.parse(text) as { stream: string | null; attempt: number };
    const d: Delivery = { id: String(req.headers['idempotency-key']), pid: String(req.headers['x-relay-pid']), stream: body.stream, attempt: body.attempt, answer: 'ok' };
    d.answer = this.answer(d);
    this.deliveries.push(d);
    if (d.answer !== 'fail' && !this.effects.has(d.id)) this.effects.set(d.id, 1); // deduplicated by message id
    this.onDelivery?.(d);
    if (d.answer === 'hold') this.held.push(res);
    else res.writeHead(d.answer === 'ok' ? 204 : 503).end();
  }
}

const children = new Set<ChildProcess>();

/** A child process of support/outbox-process.js; resolves once it printed `until`. */
function startChild(env: Record<string, string>, until: string): Promise<ChildProcess & { output: () => string }> {
  const child = spawn(process.execPath, [CHILD], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let output = '';
  return new Promise((done, fail) => {
    const seen = () => {
      if (output.split('\n').includes(until)) done(Object.assign(child, { output: () => output }));
    };
    child.stdout.on('data', (c) => {
      output += String(c);
      seen();
    });
    child.stderr.on('data', (c) => (output += String(c)));
    child.once('exit', (code, signal) => fail(new Error(`the child exited (${code ?? signal}) before "${until}":\n${output}`)));
  });
}

function kill(child: ChildProcess): Promise<void> {
  return new Promise((done) => {
    if (child.exitCode !== null || child.signalCode !== null) return done();
    child.once('exit', () => done());
    child.kill('SIGKILL');
  });
}

async function until(condition: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('the outbox with real processes', () => {
  let db: { url: string; drop(): Promise<void> };
  let producer: INestApplicationContext;
  let dataSource: DataSource;
  let receiver: Receiver;

  beforeAll(async () => {
    // The children run the built library: build it (incremental; nothing to do when current).
    execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-b', resolve(PACKAGE, 'tsconfig.build.json')], { stdio: 'inherit' });
    db = await createDatabase();
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url }),
        IdempotencyModule.forRoot({ purge: { enabled: false }, recovery: { enabled: false }, outbox: { enabled: false } }),
      ],
    }).compile();
    producer = await moduleRef.init();
    dataSource = producer.get(DataSource);
    await dataSource.query('CREATE TABLE naive_orders (id text PRIMARY KEY)');
  }, 120_000);
  afterAll(async () => {
    await Promise.all([...children].map(kill));
    await producer?.close();
    await db?.drop();
  });
  beforeEach(async () => {
    receiver = new Receiver();
    await receiver.start();
  });
  afterEach(async () => {
    await Promise.all([...children].map(kill));
    await receiver.close();
    // Every test starts from an empty outbox.
    await dataSource.query('DELETE FROM idempotency_outbox');
  });

  const relay = (env: Record<string, string> = {}) => startChild({ OUTBOX_MODE: 'relay', DATABASE_URL: db.url, RECEIVER_URL: receiver.url, ...env }, 'ready');

  const add = (entry: { topic?: string; payload?: unknown; stream?: string } = {}) =>
    producer.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost).withTransaction(() =>
      producer.get(Outbox).add({ topic: entry.topic ?? 'order.confirmed', payload: entry.payload ?? { n: randomUUID() }, stream: entry.stream }),
    );

  const undelivered = async (ids: string[]) =>
    ((await dataSource.query('SELECT count(*)::int AS n FROM idempotency_outbox WHERE id = ANY($1::uuid[]) AND delivered_at IS NULL', [ids])) as { n: number }[])[0].n;

  it('delivers again after a relay is SIGKILLed mid-delivery; the receiver has the effect once', async () => {
    const first = await relay({ LEASE: '2s' });
    receiver.answer = (d) => (receiver.of(d.id).length === 0 ? 'hold' : 'ok'); // the first delivery never gets its answer
    const held = receiver.next((d) => d.answer === 'hold');
    const id = await add();
    await held; // the receiver has the message and its effect happened; the relay has not marked it
    await kill(first);
    const second = await relay({ LEASE: '2s' });
    await until(async () => (await undelivered([id])) === 0);
    const deliveries = receiver.of(id);
    expect(deliveries.map((d) => d.pid)).toEqual([String(first.pid), String(second.pid)]);
    expect(deliveries.map((d) => d.attempt)).toEqual([1, 2]);
    expect(receiver.effects.get(id)).toBe(1);
  });

  it('several relays at once deliver every message at least once, and share the work', async () => {
    await Promise.all([relay(), relay(), relay()]);
    const ids: string[] = [];
    for (let i = 0; i < 150; i += 10) ids.push(...(await Promise.all(Array.from({ length: 10 }, () => add()))));
    await until(async () => (await undelivered(ids)) === 0);
    const received = new Set(receiver.deliveries.map((d) => d.id));
    expect(ids.filter((id) => !received.has(id))).toEqual([]);
    expect(receiver.effects.size).toBe(ids.length);
    expect(new Set(receiver.deliveries.map((d) => d.pid)).size).toBeGreaterThan(1);
    console.log(`outbox: ${ids.length} messages, ${receiver.deliveries.length} deliveries by ${new Set(receiver.deliveries.map((d) => d.pid)).size} relays`);
  });

  it('parks a message its receiver refuses past the horizon as a dead letter; a replay delivers it', async () => {
    await relay({ HORIZON: '2s' });
    receiver.answer = () => 'fail';
    const id = await add();
    const outbox = producer.get(Outbox);
    await until(async () => (await outbox.deadLetters()).some((d) => d.id === id));
    const refused = receiver.of(id).length;
    expect(refused).toBeGreaterThanOrEqual(1);
    receiver.answer = () => 'ok';
    expect(await outbox.replay([id])).toEqual([id]);
    await until(async () => (await undelivered([id])) === 0);
    expect(receiver.of(id).map((d) => d.answer)).toEqual([...Array<string>(refused).fill('fail'), 'ok']);
    expect(await outbox.deadLetters()).toEqual([]);
  });

  it('keeps each stream in order across relays and failed deliveries', async () => {
    await Promise.all([relay(), relay(), relay()]);
    // The first attempt of every second message fails: without ordering, its successor would overtake it.
    receiver.answer = (d) => (d.attempt === 1 && order.get(d.id)! % 2 === 1 ? 'fail' : 'ok');
    const order = new Map<string, number>();
    const streams = ['payment-a', 'payment-b', 'payment-c'];
    const ids: string[] = [];
    for (let i = 0; i < 4; i += 1) {
      for (const stream of streams) {
        const id = await add({ stream, payload: { i } });
        order.set(id, i);
        ids.push(id);
      }
    }
    await until(async () => (await undelivered(ids)) === 0, 90_000);
    for (const stream of streams) {
      const delivered = receiver.deliveries.filter((d) => d.stream === stream && d.answer === 'ok').map((d) => order.get(d.id));
      expect(delivered).toEqual([0, 1, 2, 3]);
    }
  }, 120_000);

  it('relays through PgBouncer in transaction mode (polling, no session), every message once and in order', async () => {
    const bouncer = await startPgBouncer({ serverUrl: process.env.TEST_ADMIN_DATABASE_URL!, poolSize: 2 });
    try {
      const pooled = bouncer.url(new URL(db.url).pathname.slice(1));
      await Promise.all([relay({ DATABASE_URL: pooled, TRANSACTION_POOLER: '1' }), relay({ DATABASE_URL: pooled, TRANSACTION_POOLER: '1' })]);
      receiver.answer = (d) => (d.attempt === 1 && receiver.of(d.id).length === 0 && Math.random() < 0.3 ? 'fail' : 'ok');
      const ids: string[] = [];
      for (let i = 0; i < 30; i += 1) ids.push(await add({ stream: `order-${i % 3}`, payload: { i } }));
      await until(async () => (await undelivered(ids)) === 0, 90_000);
      const okOrder = receiver.deliveries.filter((d) => d.answer === 'ok').map((d) => ids.indexOf(d.id));
      for (let s = 0; s < 3; s += 1) expect(okOrder.filter((i) => i % 3 === s)).toEqual(ids.map((_, i) => i).filter((i) => i % 3 === s));
      expect(receiver.effects.size).toBe(ids.length);
    } finally {
      await Promise.all([...children].map(kill));
      await bouncer.stop();
    }
  }, 120_000);

  it('the control without an outbox: a send after the commit is lost when the process dies between them', async () => {
    const id = randomUUID();
    const naive = await startChild({ OUTBOX_MODE: 'naive', DATABASE_URL: db.url, RECEIVER_URL: receiver.url, ORDER_ID: id }, 'committed');
    await kill(naive);
    await new Promise((r) => setTimeout(r, 1_500)); // longer than it would have taken to send
    expect(await dataSource.query('SELECT id FROM naive_orders WHERE id = $1', [id])).toEqual([{ id }]);
    expect(receiver.of(id)).toEqual([]); // committed, never announced
  });
});
