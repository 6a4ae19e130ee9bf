import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { IncomingMessage, Server, ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { IdempotencyModule } from 'safe-retries';
import { Outbox } from 'safe-retries/outbox';

/**
 * What the outbox suites with real processes share: relays as OS processes
 * (support/outbox-process.js, on the built library) and a real HTTP receiver
 * that deduplicates by the message id its sender gives as Idempotency-Key.
 */
const PACKAGE = resolve(__dirname, '../..');
const CHILD = resolve(__dirname, '../support/outbox-process.js');

export interface Delivery {
  id: string;
  pid: string;
  stream: string | null;
  attempt: number;
  answer: 'ok' | 'fail' | 'hold';
}

/** The receiver: its effect happens once per message id, however often the message arrives. */
export class Receiver {
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

export const children = new Set<ChildProcess>();

/** A child process of support/outbox-process.js; resolves once it printed `until`. */
export function startChild(env: Record<string, string>, until: string): Promise<ChildProcess & { output: () => string }> {
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

export function kill(child: ChildProcess): Promise<void> {
  return new Promise((done) => {
    if (child.exitCode !== null || child.signalCode !== null) return done();
    child.once('exit', () => done());
    child.kill('SIGKILL');
  });
}

export async function until(condition: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}


/** Builds the library's dist/ that the children run (incremental: nothing to do when current). */
export function buildLibrary(): void {
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-b', resolve(PACKAGE, 'tsconfig.build.json')], { stdio: 'inherit' });
}

/** The library in this process, its relay off: adds messages, each in a transaction of its own. */
export interface OutboxProducer {
  app: INestApplicationContext;
  dataSource: DataSource;
  add(entry?: { topic?: string; payload?: unknown; stream?: string }): Promise<string>;
  /** How many of `ids` are not delivered yet. */
  undelivered(ids: string[]): Promise<number>;
  close(): Promise<void>;
}

export async function startOutboxProducer(databaseUrl: string): Promise<OutboxProducer> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
      IdempotencyModule.forRoot({ purge: { enabled: false }, recovery: { enabled: false }, outbox: { enabled: false } }),
    ],
  }).compile();
  const app = await moduleRef.init();
  const dataSource = app.get(DataSource);
  return {
    app,
    dataSource,
    add: (entry = {}) =>
      app.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost).withTransaction(() =>
        app.get(Outbox).add({ topic: entry.topic ?? 'order.confirmed', payload: entry.payload ?? { n: randomUUID() }, stream: entry.stream }),
      ),
    undelivered: async (ids) =>
      ((await dataSource.query('SELECT count(*)::int AS n FROM idempotency_outbox WHERE id = ANY($1::uuid[]) AND delivered_at IS NULL', [ids])) as { n: number }[])[0].n,
    close: () => app.close(),
  };
}
