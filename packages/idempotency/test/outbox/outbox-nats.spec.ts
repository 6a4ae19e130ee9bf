import { randomUUID } from 'node:crypto';
import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { JetStreamManager, NatsConnection, connect } from 'nats';
import { DataSource } from 'typeorm';
import { IdempotencyModule, transactionalClsModule } from 'safe-retries';
import { idempotencyMigrations } from 'safe-retries/migrations';
import { Outbox, OutboxMessage } from 'safe-retries/outbox';
import { natsOutboxPublisher } from 'safe-retries/nats';
import { TestNatsServer, natsSuites, startNatsServer } from '../support/nats-server';
import { createDatabase } from '../support/test-services';

/**
 * The outbox relaying to a real nats-server with JetStream through
 * natsOutboxPublisher: messages added in transactions are stored on the
 * stream once each (a rolled-back one never), under their ids as
 * Nats-Msg-Id; a publish the relay repeats (sent, then reported failed) is
 * dropped by JetStream's duplicate detection; with the broker down the relay
 * retries, and delivers once it is back; the connection the publisher opened
 * is closed at the app's shutdown.
 */
const STREAM = 'OUTBOX';
const SUBJECTS = 'outbox-test.>';

interface Stored {
  id: string | undefined;
  subject: string;
  payload: unknown;
}

natsSuites()('Outbox to NATS JetStream (a real nats-server)', () => {
  let nats: TestNatsServer;
  let db: { url: string; drop(): Promise<void> };
  let app: INestApplication;
  let appClosed = false;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  /** Ids whose first publish is reported as failed after it was sent: the relay sends them again. */
  const failAfterSend = new Set<string>();
  const sends = new Map<string, number>();

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url, name: 'test-reader', maxReconnectAttempts: -1 });
    jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: STREAM, subjects: [SUBJECTS] });
    db = await createDatabase();
    const nats$ = natsOutboxPublisher({ servers: nats.url });
    const publish = Object.assign(
      async (message: OutboxMessage, signal: AbortSignal) => {
        sends.set(message.id, (sends.get(message.id) ?? 0) + 1);
        await nats$(message, signal);
        if (failAfterSend.delete(message.id)) throw new Error('the acknowledgement was lost');
      },
      { close: () => nats$.close!() },
    );
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, migrations: idempotencyMigrations(), migrationsRun: true }),
        transactionalClsModule(),
        IdempotencyModule.forRoot({ scope: () => 'tenant', purge: { enabled: false }, recovery: { enabled: false }, outbox: { publish } }),
      ],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });
  afterAll(async () => {
    if (!appClosed) await app?.close();
    await nc?.close();
    await nats?.destroy();
    await db?.drop();
  });

  /**
   * Adds one message per tag, each in a transaction of its own (rolled back
   * when asked), and answers their ids; `added` sees each id before the commit.
   */
  const add = async (tags: string[], options: { rollback?: boolean; added?: (id: string) => void } = {}): Promise<string[]> => {
    const txHost = app.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost);
    const ids: string[] = [];
    for (const tag of tags) {
      await txHost
        .withTransaction(async () => {
          const id = await app.get(Outbox).add({ topic: `outbox-test.${tag.split('-')[0]}`, payload: { tag } });
          options.added?.(id);
          ids.push(id);
          if (options.rollback) throw new Error('rolled back');
        })
        .catch((error: Error) => {
          if (error.message !== 'rolled back') throw error;
        });
    }
    return ids;
  };
  const tagged = (prefix: string, n: number) => Array.from({ length: n }, () => `${prefix}-${randomUUID()}`);

  /** Every message on the stream. */
  const stored = async (): Promise<Stored[]> => {
    const { state } = await jsm.streams.info(STREAM);
    const out: Stored[] = [];
    for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
      const m = await jsm.streams.getMessage(STREAM, { seq });
      out.push({ id: m.header?.get('Nats-Msg-Id'), subject: m.subject, payload: JSON.parse(new TextDecoder().decode(m.data)) });
    }
    return out;
  };
  const storedOf = async (ids: string[]) => (await stored()).filter((m) => m.id !== undefined && ids.includes(m.id));

  const delivered = async (ids: string[]): Promise<number> => {
    const rows = (await app.get(DataSource).query('SELECT count(*)::int AS n FROM idempotency_outbox WHERE id = ANY($1) AND delivered_at IS NOT NULL', [ids])) as { n: number }[];
    return rows[0].n;
  };
  const until = async (what: string, done: () => Promise<boolean>, ms = 30_000) => {
    const deadline = Date.now() + ms;
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  it('stores each committed message on the stream once, under its id, and never a rolled-back one', async () => {
    const tags = tagged('order', 10);
    const ids = await add(tags);
    const rolledBack = await add(tagged('order', 1), { rollback: true });
    await until('the messages are delivered', async () => (await delivered(ids)) === ids.length);
    const onStream = await storedOf([...ids, ...rolledBack]);
    expect(onStream.map((m) => m.id).sort()).toEqual([...ids].sort());
    expect(onStream.map((m) => m.subject)).toEqual(ids.map(() => 'outbox-test.order'));
    expect(onStream.map((m) => (m.payload as { tag: string }).tag).sort()).toEqual([...tags].sort());
    expect(ids.map((id) => sends.get(id))).toEqual(ids.map(() => 1));
  });

  it('a publish the relay repeats is dropped by JetStream: one message per id on the stream', async () => {
    // Sent, then reported failed (a lost acknowledgement): the relay sends each again, under the same id.
    const tags = tagged('repeat', 5);
    const repeated = await add(tags.slice(0, 3), { added: (id) => failAfterSend.add(id) });
    const once = await add(tags.slice(3));
    const all = [...repeated, ...once];
    await until('the messages are delivered', async () => (await delivered(all)) === all.length);
    expect(all.map((id) => sends.get(id))).toEqual([2, 2, 2, 1, 1]);
    // Stored once each: by payload, whatever the header, and under its id.
    const onStream = (await stored()).filter((m) => tags.includes((m.payload as { tag: string }).tag));
    expect(onStream.map((m) => (m.payload as { tag: string }).tag).sort()).toEqual([...tags].sort());
    expect(onStream.map((m) => m.id).sort()).toEqual([...all].sort());
  });

  it('the control: without Nats-Msg-Id the stream keeps both copies of a repeated publish', async () => {
    const js = nc.jetstream();
    const subject = `outbox-test.control-${randomUUID()}`;
    const data = new TextEncoder().encode('{}');
    const first = await js.publish(subject, data);
    const second = await js.publish(subject, data);
    expect(second.duplicate).toBe(false);
    expect(second.seq).toBe(first.seq + 1);
  });

  it('with the broker down the relay retries, and delivers each message once when it is back', async () => {
    await nats.stop();
    const ids = await add(tagged('outage', 4));
    const failed = async () => (await app.get(DataSource).query('SELECT count(*)::int AS n FROM idempotency_outbox WHERE id = ANY($1) AND last_error IS NOT NULL', [ids])) as { n: number }[];
    await until('every message failed at least once', async () => (await failed())[0].n === ids.length, 60_000);
    expect(await delivered(ids)).toBe(0);
    await nats.start(); // same port, same store
    await until('the messages are delivered', async () => (await delivered(ids)) === ids.length, 60_000);
    // The relay's connection may be back before the test's own reader is.
    await until('the reader is connected again', () => nc.flush().then(() => true, () => false));
    expect((await storedOf(ids)).map((m) => m.id).sort()).toEqual([...ids].sort());
  });

  it('honours the abort signal while the broker does not answer', async () => {
    const publisher = natsOutboxPublisher({ servers: nats.url });
    try {
      await publisher({ id: randomUUID(), topic: 'outbox-test.abort', payload: {}, stream: null, attempt: 1 }, new AbortController().signal); // connected
      await nats.stop();
      const lease = new AbortController();
      setTimeout(() => lease.abort(new Error('the lease ended')), 200);
      await expect(publisher({ id: randomUUID(), topic: 'outbox-test.abort', payload: {}, stream: null, attempt: 1 }, lease.signal)).rejects.toThrow('the lease ended'); // not nats' own timeout, 5 s later
    } finally {
      await publisher.close!();
      await nats.start();
      await until('the reader is connected again', () => nc.flush().then(() => true, () => false));
    }
  });

  it("publishes through the app's own connection, on the subject asked for, and leaves it open", async () => {
    const publisher = natsOutboxPublisher({ connection: nc, subject: (m) => `outbox-test.own.${m.topic}` });
    const id = randomUUID();
    await publisher({ id, topic: 'shipped', payload: { n: 1 }, stream: null, attempt: 1 }, new AbortController().signal);
    await publisher.close!();
    expect(nc.isClosed()).toBe(false);
    expect(await storedOf([id])).toEqual([{ id, subject: 'outbox-test.own.shipped', payload: { n: 1 } }]);
    expect(() => natsOutboxPublisher({})).toThrow('give servers or connection');
  });

  it('closes the connection it opened at the app shutdown', async () => {
    await until('the publisher is connected', async () => (await nats.clientNames()).includes('safe-retries-outbox'));
    await app.close();
    appClosed = true;
    // The server drops a closed connection from its list a moment after the client has closed it.
    await until('the server has dropped the publisher\'s connection', async () => !(await nats.clientNames()).includes('safe-retries-outbox'), 5_000);
  });
});
