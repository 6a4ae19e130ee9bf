import { randomUUID } from 'node:crypto';
import { Body, Controller, INestApplication, Post, Query, Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import request from 'supertest';
import { DataSource, QueryRunner } from 'typeorm';
import { IdempotencyModule, IdempotencyModuleOptions, Idempotent, Operation, PhasedOperation, transactionalClsModule } from 'safe-retries';
import { idempotencyMigrations } from 'safe-retries/migrations';
import { IdempotentConsumer } from 'safe-retries/messages';
import { Outbox, OutboxEntry, OutboxMessage, OutboxOutsideTransactionError } from 'safe-retries/outbox';
import { IdempotencyPurgeService } from 'safe-retries';
import { Client } from 'pg';
import { startPostgres } from '@safe-retries/dev-postgres';
import { PgCountingProxy, startPgCountingProxy } from '../support/pg-counting-proxy';
import { createDatabase } from '../support/test-services';
import { waitFor } from '../support/wait-for';

/** A relay's delivery slots, and its caps per lane and per group of lanes (docs/outbox.md). */
const RELAY_SLOTS = 40;
const RELAY_LANE_CAP = 4;
const RELAY_GROUP_CAP = 20;

/**
 * The outbox in one process against a real PostgreSQL: a message added in a
 * key's transaction commits with the key and the business write on every mode
 * (durable, one commit, the phases of a phased operation, IdempotentConsumer)
 * and rolls back with them; a list of messages is one statement, however
 * long; the relay, as it runs in an app, hands each to the publisher under
 * its id, keeps a stream in order, waits as long as a publisher's failure
 * asks, parks a message past its horizon and delivers it again when replayed.
 * The app reaches PostgreSQL through a proxy that counts its statements
 * (test/support/pg-counting-proxy.ts).
 */

@Controller()
class WritesController {
  constructor(
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly outbox: Outbox,
  ) {}

  private async write(tag: string, fail: boolean): Promise<{ message: string }> {
    await this.txHost.tx.query('INSERT INTO effects (tag) VALUES ($1)', [tag]);
    const message = await this.outbox.add({ topic: 'effect.written', payload: { tag } });
    if (fail) throw new Error('the handler failed after adding its message');
    return { message };
  }

  @Post('durable')
  @Idempotent()
  durable(@Body() body: { tag: string }, @Query('fail') fail?: string) {
    return this.write(body.tag, fail === '1');
  }

  @Post('one')
  @Idempotent({ commit: 'one' })
  one(@Body() body: { tag: string }, @Query('fail') fail?: string) {
    return this.write(body.tag, fail === '1');
  }

  @Post('phased')
  @Idempotent({ phased: 'outbox.phased' })
  async phased(@Body() body: { tag: string }, @Operation() op: PhasedOperation<{ tag: string }>, @Query('fail') fail?: string) {
    await op.checkpoint('started', () => this.write(`${body.tag}:started`, false), () => ({ tag: body.tag }));
    return op.finish(() => this.write(`${body.tag}:finished`, fail === '1'));
  }
}

/**
 * The module alone on a new database (with WritesController's `effects`
 * table), reached through a counting proxy, with the outbox options given (no
 * purge, recovery or replay cache). `close` ends the app, the proxy and the database.
 */
async function outboxApp(
  outbox: NonNullable<IdempotencyModuleOptions['outbox']>,
  controllers: Type[] = [],
  postgres: IdempotencyModuleOptions['postgres'] = {},
): Promise<{ app: INestApplication; db: { url: string; drop(): Promise<void> }; proxy: PgCountingProxy; close(): Promise<void> }> {
  const db = await createDatabase();
  const admin = new URL(db.url);
  const proxy = await startPgCountingProxy({ host: admin.hostname, port: Number(admin.port) });
  const moduleRef = await Test.createTestingModule({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url: proxy.url(db.url), migrations: idempotencyMigrations(), migrationsRun: true }),
      transactionalClsModule(),
      IdempotencyModule.forRoot({ scope: () => 'tenant', purge: { enabled: false }, recovery: { enabled: false }, replayCache: { enabled: false }, outbox, postgres }),
    ],
    controllers,
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  await app.get(DataSource).query('CREATE TABLE effects (tag text NOT NULL)');
  const close = async () => {
    await app.close();
    await proxy.close();
    await db.drop();
  };
  return { app, db, proxy, close };
}

/** Adds `entries` to `app`'s outbox in a transaction of their own; their ids. */
function addIn(app: INestApplication, entries: OutboxEntry[]): Promise<string[]> {
  return app.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost).withTransaction(() => app.get(Outbox).add(entries));
}

/** Reads of the app's database: a query's rows, and the messages whose payload's tag starts with `tag`. */
function reads(dataSource: () => DataSource) {
  const rows = async (sql: string, params: unknown[] = []) => (await dataSource().query(sql, params)) as Record<string, unknown>[];
  const messagesOf = (tag: string) => rows(`SELECT id::text, topic, payload FROM idempotency_outbox WHERE payload->>'tag' LIKE $1 ORDER BY seq`, [`${tag}%`]);
  return { rows, messagesOf };
}

describe('Outbox.add (PostgreSQL, in one process, no relay)', () => {
  let app: INestApplication;
  let db: { url: string; drop(): Promise<void> };
  let dataSource: DataSource;
  let proxy: PgCountingProxy;
  let close: () => Promise<void>;

  beforeAll(async () => {
    // No relay runs (its statements would count with the adds'): the messages stay where they were added.
    ({ app, db, proxy, close } = await outboxApp({ enabled: false, publish: async () => undefined }, [WritesController]));
    dataSource = app.get(DataSource);
  });
  afterAll(() => close?.());

  const { rows, messagesOf } = reads(() => dataSource);
  const effectsOf = (tag: string) => rows('SELECT tag FROM effects WHERE tag LIKE $1', [`${tag}%`]);

  it.each(['durable', 'one', 'phased'])('commits the message with the key and the write on the %s route, and rolls it back with them', async (route) => {
    const tag = `${route}-${randomUUID()}`;
    const key = randomUUID();
    const first = await request(app.getHttpServer()).post(`/${route}`).set('Idempotency-Key', key).send({ tag }).expect(201);
    const retry = await request(app.getHttpServer()).post(`/${route}`).set('Idempotency-Key', key).send({ tag }).expect(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    const committed = await messagesOf(tag);
    expect(committed.length).toBe(route === 'phased' ? 2 : 1); // a phased route: one per phase
    expect(committed.at(-1)!.id).toBe((first.body as { message: string }).message);
    expect((await effectsOf(tag)).length).toBe(committed.length);

    const failed = `${route}-failed-${randomUUID()}`;
    await request(app.getHttpServer()).post(`/${route}?fail=1`).set('Idempotency-Key', randomUUID()).send({ tag: failed }).expect(500);
    // The last unit rolled back: its write and its message together (a phased route keeps its committed first phase).
    expect((await messagesOf(failed)).length).toBe((await effectsOf(failed)).length);
    expect((await messagesOf(failed)).length).toBe(route === 'phased' ? 1 : 0);
  });

  it('commits the message with a consumed message, and rolls it back with it', async () => {
    const consumer = app.get(IdempotentConsumer);
    const outbox = app.get(Outbox);
    const tag = `consumer-${randomUUID()}`;
    await consumer.process('test', tag, () => outbox.add({ topic: 'consumed', payload: { tag } }));
    await expect(consumer.process('test', `${tag}-failed`, async () => {
      await outbox.add({ topic: 'consumed', payload: { tag: `${tag}-failed` } });
      throw new Error('the effect failed');
    })).rejects.toThrow('the effect failed');
    expect((await messagesOf(tag)).map((m) => m.payload)).toEqual([{ tag }]);
  });

  it('refuses a message outside a transaction', async () => {
    await expect(app.get(Outbox).add({ topic: 'lost', payload: {} })).rejects.toBeInstanceOf(OutboxOutsideTransactionError);
    await expect(app.get(Outbox).add([{ topic: 'lost', payload: {} }])).rejects.toBeInstanceOf(OutboxOutsideTransactionError);
    await expect(app.get(Outbox).add([])).rejects.toBeInstanceOf(OutboxOutsideTransactionError);
  });

  const txHost = () => app.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost);
  const fanned = (tag: string, n: number) => Array.from({ length: n }, (_, i) => ({ topic: 'fanned', payload: { tag: `${tag}:${String(i).padStart(2, '0')}` } }));

  it('refuses a group without a lane', async () => {
    await expect(txHost().withTransaction(() => app.get(Outbox).add({ topic: 't', payload: {}, group: 'g' }))).rejects.toThrow('Outbox.add: group must be a non-empty string, given with a lane');
  });

  it('adds a list in one statement, however long, in its order, and answers the ids in it', async () => {
    const added = async (n: number) => {
      const tag = `list-${randomUUID()}`;
      const before = proxy.counts().statements;
      const ids = await txHost().withTransaction(() => app.get(Outbox).add(fanned(tag, n)));
      return { tag, ids, statements: proxy.counts().statements - before };
    };
    const one = await added(1);
    const sixteen = await added(16);
    expect(one.statements).toBe(3); // BEGIN, the INSERT, COMMIT
    expect(sixteen.statements).toBe(one.statements);
    const rows = await messagesOf(sixteen.tag);
    expect(rows.map((r) => r.id)).toEqual(sixteen.ids);
    expect(rows.map((r) => r.payload)).toEqual(fanned(sixteen.tag, 16).map((e) => e.payload));
    expect(await txHost().withTransaction(() => app.get(Outbox).add([]))).toEqual([]);
  });

  /** Adds a message in a transaction of `on`, and answers how many prepared adds its connection then holds. */
  const preparedAdds = (on: INestApplication, tag: string) => {
    const host = on.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost);
    return host.withTransaction(async () => {
      await on.get(Outbox).add({ topic: 'prepared', payload: { tag } });
      return host.tx.query<{ n: number }[]>(`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name = 'safe_retries_outbox_add'`);
    });
  };

  it('prepares its statement on the connection of the transaction it adds in: planned once per connection', async () => {
    expect(await preparedAdds(app, randomUUID())).toEqual([{ n: 1 }]);
  });

  it('sends it unnamed when statements are not prepared (a transaction pooler that keeps none)', async () => {
    const unprepared = await outboxApp({ enabled: false, publish: async () => undefined }, [], { preparedStatements: false });
    try {
      const tag = randomUUID();
      expect(await preparedAdds(unprepared.app, tag)).toEqual([{ n: 0 }]);
      expect((await reads(() => unprepared.app.get(DataSource)).messagesOf(tag)).map((m) => m.payload)).toEqual([{ tag }]);
    } finally {
      await unprepared.close();
    }
  });

  it('commits a list with its transaction and rolls it back with it; its commit wakes the relay once', async () => {
    const listener = new Client({ connectionString: db.url });
    await listener.connect();
    const notices: string[] = [];
    listener.on('notification', (n) => notices.push(n.channel));
    await listener.query('LISTEN idempotency_outbox');
    try {
      const tag = `list-tx-${randomUUID()}`;
      await expect(
        txHost().withTransaction(async () => {
          await app.get(Outbox).add(fanned(`${tag}:rolled-back`, 3));
          throw new Error('the effect failed');
        }),
      ).rejects.toThrow('the effect failed');
      await txHost().withTransaction(() => app.get(Outbox).add(fanned(tag, 3)));
      await waitFor('the notification', () => notices.length > 0);
      await listener.query('SELECT 1'); // a notification queued with it would have come before this answer
      expect(notices).toEqual(['idempotency_outbox']);
      expect((await messagesOf(tag)).length).toBe(3);
      expect((await messagesOf(`${tag}:rolled-back`)).length).toBe(0);
    } finally {
      await listener.end();
    }
  });
});

/**
 * The relay running on its own (LISTEN/NOTIFY, its poll every 5 s), as an app
 * runs it: it hands each committed message to the publisher under its id,
 * marks deliveries that end together in one statement, keeps a stream in
 * order, shares its slots among lanes and groups, waits as long as a
 * publisher's failure asks, parks a message past its horizon and delivers it
 * again when replayed. Its slots and caps are those docs/outbox.md gives.
 */
describe('Outbox relay (PostgreSQL, the relay running)', () => {
  let app: INestApplication;
  let dataSource: DataSource;
  let close: () => Promise<void>;
  /** Each delivery as the publisher got it, with the moment it did. */
  const published: (OutboxMessage & { at: number })[] = [];
  /** Deliveries the publisher has not answered yet. */
  let inFlight = 0;
  /** Whether the publisher refuses a message: true, or the properties of its error (`retryAfterMs`). */
  let fails: (m: OutboxMessage) => boolean | { retryAfterMs: unknown } = () => false;
  /** What the publisher waits for before it answers (a slow receiver). */
  let slow: (m: OutboxMessage) => Promise<void> | undefined = () => undefined;

  beforeAll(async () => {
    ({ app, close } = await outboxApp(
      {
        horizon: '3s',
        publish: async (message) => {
          published.push({ ...message, at: performance.now() });
          inFlight++;
          try {
            await slow(message);
            const refusal = fails(message);
            if (refusal) throw Object.assign(new Error(`refused ${message.id}`), refusal === true ? {} : refusal);
          } finally {
            inFlight--;
          }
        },
      },
      [WritesController],
    ));
    dataSource = app.get(DataSource);
  });
  afterAll(() => close?.());

  const { rows, messagesOf } = reads(() => dataSource);
  const txHost = () => app.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost);
  const undelivered = async (ids: string[]) => (await rows('SELECT id FROM idempotency_outbox WHERE id = ANY($1::uuid[]) AND delivered_at IS NULL', [ids])).length;
  const deliveredAll = (ids: string[]) => waitFor(`${ids.length} message(s) to be delivered`, async () => (await undelivered(ids)) === 0);
  /** Every slot free: no delivery in flight and no message due (the relay claims a due one at once). */
  const idle = () =>
    waitFor('the relay to be idle', async () => {
      if (inFlight > 0) return false;
      const [{ n }] = (await rows('SELECT count(*)::int AS n FROM idempotency_outbox WHERE delivered_at IS NULL AND dead_at IS NULL AND next_attempt_at <= now()')) as { n: number }[];
      return n === 0 && inFlight === 0;
    });
  /** Makes `ids` due now, and tells the relay (as an added message's commit does). */
  const dueNow = async (ids: string[]) => {
    await dataSource.query('UPDATE idempotency_outbox SET next_attempt_at = now() WHERE id = ANY($1::uuid[])', [ids]);
    await dataSource.query(`SELECT pg_notify('idempotency_outbox', '')`);
  };

  it('hands each committed message to the publisher once, under its id, and marks it delivered', async () => {
    await idle();
    const tag = `relay-${randomUUID()}`;
    await request(app.getHttpServer()).post('/durable').set('Idempotency-Key', randomUUID()).send({ tag }).expect(201);
    const [added] = await messagesOf(tag);
    await deliveredAll([added.id as string]);
    await new Promise((r) => setTimeout(r, 200)); // time for a second delivery, were there one
    expect(published.filter((m) => m.id === added.id).map(({ at: _, ...m }) => m)).toEqual([{ id: added.id, topic: 'effect.written', payload: { tag }, stream: null, attempt: 1 }]);
    const [row] = await rows('SELECT delivered_at IS NOT NULL AS delivered, attempts FROM idempotency_outbox WHERE id = $1', [added.id]);
    expect(row).toEqual({ delivered: true, attempts: 1 });
  });

  it('marks deliveries that end together in one statement, each fenced on its own claim', async () => {
    await idle();
    const tag = randomUUID();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let ids: string[] = [];
    slow = (m) => ((m.payload as { tag?: string }).tag?.startsWith(tag) ? released : undefined);
    try {
      ids = await txHost().withTransaction(() => app.get(Outbox).add(Array.from({ length: RELAY_SLOTS }, (_, i) => ({ topic: 'batched', payload: { tag: `${tag}-${i}` } }))));
      await waitFor('every slot to hold one', () => published.filter((m) => ids.includes(m.id)).length === RELAY_SLOTS);
      // The first one's claim is another relay's now (its lease ended, it was claimed again): its mark must not land.
      await dataSource.query('UPDATE idempotency_outbox SET attempts = attempts + 1 WHERE id = $1', [ids[0]]);
      release();
      await deliveredAll(ids.slice(1));
    } finally {
      slow = () => undefined;
      release();
    }
    // The first delivery's mark, and one for the rest (they ended while it ran): not one a delivery.
    const marked = await rows('SELECT count(*)::int AS n, count(DISTINCT delivered_at)::int AS statements FROM idempotency_outbox WHERE id = ANY($1::uuid[]) AND delivered_at IS NOT NULL', [ids]);
    expect(marked).toEqual([{ n: RELAY_SLOTS - 1, statements: expect.any(Number) }]);
    expect(marked[0].statements).toBeLessThanOrEqual(2);
    expect(await rows('SELECT 1 FROM idempotency_outbox WHERE id = $1 AND delivered_at IS NULL', [ids[0]])).toHaveLength(1);
    await dueNow([ids[0]]);
    await deliveredAll([ids[0]]);
  });

  type Entries = { stream?: string; tag: string }[];
  const ordered = (e: Entries[number]) => ({ topic: 'ordered', payload: { tag: e.tag }, stream: e.stream });

  /** Each entry added in a transaction of its own. */
  async function addInTransactions(entries: Entries): Promise<string[]> {
    const ids: string[] = [];
    for (const e of entries) ids.push(await txHost().withTransaction(() => app.get(Outbox).add(ordered(e))));
    return ids;
  }

  const addInOneList = (entries: Entries) => txHost().withTransaction(() => app.get(Outbox).add(entries.map(ordered)));

  /** Delivers five messages (added by `add`) where the second fails once; the order in which they were first delivered. */
  async function deliveryOrder(stream: string | undefined, add = addInTransactions): Promise<number[]> {
    await idle();
    const tag = randomUUID();
    let failedOnce = false;
    let ids: string[] = [];
    fails = (m) => m.id === ids[1] && !failedOnce && (failedOnce = true);
    // Held until all five are added: the relay sees them all, as one would that was busy meanwhile.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    slow = (m) => ((m.payload as { tag?: string }).tag?.startsWith(tag) ? released : undefined);
    try {
      ids = await add([0, 1, 2, 3, 4].map((i) => ({ stream, tag: `${tag}-${i}` })));
      release();
      await deliveredAll(ids);
    } finally {
      fails = () => false;
      slow = () => undefined;
      release();
    }
    const delivered: number[] = [];
    for (const m of published) if (ids.includes(m.id) && !delivered.includes(ids.indexOf(m.id)) && !(m.id === ids[1] && m.attempt === 1)) delivered.push(ids.indexOf(m.id));
    return delivered;
  }

  it('keeps the messages of a stream in order across a failed delivery', async () => {
    expect(await deliveryOrder(`stream-${randomUUID()}`)).toEqual([0, 1, 2, 3, 4]);
  });

  it("keeps the messages of a stream added in one list in the list's order", async () => {
    expect(await deliveryOrder(`stream-${randomUUID()}`, addInOneList)).toEqual([0, 1, 2, 3, 4]);
  });

  it('delivers messages without a stream past a failed one (the control: order is not kept unless asked)', async () => {
    const order = await deliveryOrder(undefined);
    expect(order.indexOf(1)).toBeGreaterThan(order.indexOf(2));
  });

  it("delivers a lane's messages while another lane's slow deliveries hold their cap of slots, however many it has due", async () => {
    await idle();
    const tag = randomUUID();
    const outbox = app.get(Outbox);
    const laned = (lane: string, n: number) => Array.from({ length: n }, (_, i) => ({ topic: 'laned', payload: { tag: `${tag}-${lane}-${i}` }, lane: `${tag}-${lane}` }));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    slow = (m) => ((m.payload as { tag?: string }).tag?.startsWith(`${tag}-a-`) ? released : undefined);
    const sent = (ids: string[]) => published.filter((m) => ids.includes(m.id)).length;
    try {
      // Lane A's 100 are older than lane B's 3 (one commit: the relay sees them together): a claim in age order would take A's only.
      const [a, b] = await txHost().withTransaction(async () => [await outbox.add(laned('a', 100)), await outbox.add(laned('b', 3))]);
      await waitFor("b's three to be sent", () => sent(b) === 3);
      const [more] = await txHost().withTransaction(() => outbox.add(laned('b', 1).map((e) => ({ ...e, payload: { tag: `${tag}-b-more` } }))));
      await deliveredAll([more]);
      // A's deliveries are all still in flight, and no more than the cap of them.
      expect(sent(a)).toBe(RELAY_LANE_CAP);
      expect(await undelivered(a)).toBe(100);
      release();
      await deliveredAll([...a, ...b]);
    } finally {
      slow = () => undefined;
      release();
    }
  });

  it("shares the slots among groups before lanes: a group of 24 slow lanes holds its cap, another group's messages and an ungrouped lane's go meanwhile", async () => {
    await idle();
    const tag = randomUUID();
    const outbox = app.get(Outbox);
    const entry = (lane: string, i: number, group?: string) => ({ topic: 'grouped', payload: { tag: `${tag}-${lane}-${i}` }, lane: `${tag}-${lane}`, group });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    slow = (m) => ((m.payload as { tag?: string }).tag?.startsWith(`${tag}-a`) ? released : undefined);
    const sent = (ids: string[]) => published.filter((m) => ids.includes(m.id));
    try {
      // Group A's 24 lanes of 5 messages each are older than the rest: a claim by lane alone would give A 38 of the 40 slots.
      const [a, b, c] = await txHost().withTransaction(async () => [
        await outbox.add(Array.from({ length: 120 }, (_, i) => entry(`a${i % 24}`, i, `${tag}-group-a`))),
        await outbox.add([0, 1, 2].map((i) => entry('b', i, `${tag}-group-b`))),
        await outbox.add([0, 1].map((i) => entry('c', i))),
      ]);
      // The claim's deliveries start at once: B's and C's end, A's hang.
      await waitFor("b's and c's five to be sent", () => sent([...b, ...c]).length === 5);
      await deliveredAll([...b, ...c]);
      // Group A: its cap of the slots, each in another of its lanes (every lane's oldest in turn).
      const lanesOfA = sent(a).map((m) => (m.payload as { tag: string }).tag.split('-').at(-2));
      expect(lanesOfA).toHaveLength(RELAY_GROUP_CAP);
      expect(new Set(lanesOfA).size).toBe(RELAY_GROUP_CAP);
      // With A's 20 still in flight, later messages of B's go, and A takes no more.
      const more = await txHost().withTransaction(() => outbox.add([3, 4].map((i) => entry('b', i, `${tag}-group-b`))));
      await deliveredAll(more);
      expect(sent(more)).toHaveLength(2);
      expect(sent(a)).toHaveLength(RELAY_GROUP_CAP);
      release();
      await deliveredAll([...a, ...b, ...c]);
    } finally {
      slow = () => undefined;
      release();
    }
  });

  it("fills a claim with messages without a lane beside a lane's, however many are older", async () => {
    await idle();
    const tag = randomUUID();
    const outbox = app.get(Outbox);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    slow = (m) => ((m.payload as { tag?: string }).tag?.startsWith(tag) ? released : undefined);
    const ours = () => published.filter((m) => (m.payload as { tag?: string }).tag?.startsWith(tag));
    try {
      // One commit: the relay's claim sees the 50 without a lane and, newer, the lane's one.
      const [unlaned, [laned]] = await txHost().withTransaction(async () => [
        await outbox.add(Array.from({ length: RELAY_SLOTS + 10 }, (_, i) => ({ topic: 'unlaned', payload: { tag: `${tag}-${i}` } }))),
        await outbox.add([{ topic: 'laned', payload: { tag: `${tag}-laned` }, lane: `${tag}-lane` }]),
      ]);
      await waitFor('every slot to hold one', () => ours().length >= RELAY_SLOTS);
      // One claim: the lane's message, and the oldest of the others for the rest of the slots.
      expect(ours().map((m) => m.id).sort()).toEqual([laned, ...unlaned.slice(0, RELAY_SLOTS - 1)].sort());
      release();
      await deliveredAll([...unlaned, laned]);
    } finally {
      slow = () => undefined;
      release();
    }
  });

  it("waits as long as a publisher's failure asks (retryAfterMs), on the database's clock, then hands the message over again", async () => {
    await idle();
    const tag = `later-${randomUUID()}`;
    let id = '';
    const dueInMs = async () => Number((await rows('SELECT extract(epoch FROM next_attempt_at - now()) * 1000 AS ms FROM idempotency_outbox WHERE id = $1', [id]))[0].ms);
    const attempts = () => published.filter((m) => m.id === id);
    // By its tag: the relay may hand it over before `add` has answered its id.
    fails = (m) => (m.payload as { tag?: string }).tag === tag && m.attempt === 1 && { retryAfterMs: 2_500.2 };
    try {
      [id] = await addInTransactions([{ tag }]);
      await waitFor('its failure to be marked', async () => (await rows('SELECT 1 FROM idempotency_outbox WHERE id = $1 AND last_error IS NOT NULL', [id])).length === 1);
      const asked = await dueInMs();
      expect(asked).toBeGreaterThan(2_000);
      expect(asked).toBeLessThanOrEqual(2_501);
      // Past the backoff's first wait (at most 1 s): still not handed over.
      await new Promise((r) => setTimeout(r, 1_100));
      expect(attempts().map((m) => m.attempt)).toEqual([1]);
      // Its time come, it is.
      await deliveredAll([id]);
      expect(attempts().map((m) => m.attempt)).toEqual([1, 2]);
      expect(attempts()[1].at - attempts()[0].at).toBeGreaterThanOrEqual(2_400);
    } finally {
      fails = () => false;
    }
  });

  it('takes the backoff when the asked wait is not a number of ms; parks a message whose asked wait passes the horizon', async () => {
    await idle();
    const asked = new Map<string, number>();
    let ignored = '';
    // `ignored` asks -1 once, then is delivered; the others ask 4 s and more (the horizon is 3 s).
    fails = (m) => asked.has(m.id) && (m.id !== ignored || m.attempt === 1) && { retryAfterMs: asked.get(m.id) };
    let late = '';
    let never = '';
    try {
      await txHost().withTransaction(async () => {
        [ignored, late, never] = await app.get(Outbox).add([{ tag: `ignored-${randomUUID()}` }, { tag: `late-${randomUUID()}` }, { tag: `never-${randomUUID()}` }].map((e) => ordered(e)));
        asked.set(ignored, -1).set(late, 4_000).set(never, Number.MAX_VALUE);
      });
      await waitFor('both to be dead letters', async () => (await app.get(Outbox).deadLetters()).filter((d) => d.id === late || d.id === never).length === 2);
      // Parked at their first failure: 4 s ahead and further, the horizon 3 s.
      const parked = (await app.get(Outbox).deadLetters()).filter((d) => d.id === late || d.id === never);
      expect(parked.map((d) => d.attempts)).toEqual([1, 1]);
      await deliveredAll([ignored]);
      const attempts = published.filter((m) => m.id === ignored);
      expect(attempts.map((m) => m.attempt)).toEqual([1, 2]);
      // The backoff after a first failure: at most 1 s (and the relay's claim when it is due).
      expect(attempts[1].at - attempts[0].at).toBeLessThan(2_000);
      expect((await app.get(Outbox).deadLetters()).map((d) => d.id)).not.toContain(ignored);
    } finally {
      fails = () => false;
    }
    await app.get(Outbox).replay([late, never]);
    await deliveredAll([late, never]);
  });

  it('parks a message that fails past the horizon as a dead letter; a replay delivers it', async () => {
    await idle();
    let id = '';
    const tag = `dead-${randomUUID()}`;
    fails = (m) => (m.payload as { tag?: string }).tag === tag;
    try {
      [id] = await addInTransactions([{ tag }]);
      await waitFor('it to be a dead letter', async () => (await app.get(Outbox).deadLetters()).some((d) => d.id === id));
    } finally {
      fails = () => false;
    }
    const [dead] = (await app.get(Outbox).deadLetters()).filter((d) => d.id === id);
    expect(dead).toMatchObject({ id, topic: 'ordered', lastError: `refused ${id}` });
    expect(dead.attempts).toBeGreaterThanOrEqual(1);
    const before = published.filter((m) => m.id === id).length;
    await new Promise((r) => setTimeout(r, 1_500)); // past its backoff: still not retried
    expect(published.filter((m) => m.id === id)).toHaveLength(before);
    expect(await app.get(Outbox).replay([id])).toEqual([id]);
    await deliveredAll([id]);
    expect(published.filter((m) => m.id === id).slice(before).map((m) => [m.id, m.attempt])).toEqual([[id, 1]]);
    expect(await app.get(Outbox).deadLetters()).toEqual([]);
  });

  it('purges delivered messages past their retention, counted from delivery; waiting ones and dead letters stay', async () => {
    await idle();
    let held: string[] = [];
    // The last two wait (their publisher asks a minute): one is left waiting, the other made a dead letter below.
    fails = (m) => held.includes(m.id) && { retryAfterMs: 60_000 };
    try {
      const [old, recent, waiting, dead] = await txHost().withTransaction(async () => {
        const ids = await app.get(Outbox).add([0, 1, 2, 3].map((i) => ordered({ tag: `purge-${i}` })));
        held = ids.slice(2);
        return ids;
      });
      await deliveredAll([old, recent]);
      await waitFor('both failures to be marked', async () => (await rows('SELECT 1 FROM idempotency_outbox WHERE id = ANY($1::uuid[]) AND last_error IS NOT NULL', [held])).length === 2);
      await dataSource.query(`UPDATE idempotency_outbox SET delivered_at = now() - interval '8 days' WHERE id = $1`, [old]);
      await dataSource.query(`UPDATE idempotency_outbox SET delivered_at = now() - interval '6 days' WHERE id = $1`, [recent]);
      await dataSource.query(`UPDATE idempotency_outbox SET dead_at = now() - interval '30 days', created_at = now() - interval '40 days' WHERE id = $1`, [dead]);
      const result = await app.get(IdempotencyPurgeService).purgeOnce();
      expect(result).toMatchObject({ outbox: 1, skipped: false });
      const left = (await rows('SELECT id::text FROM idempotency_outbox WHERE id = ANY($1::uuid[]) ORDER BY seq', [[old, recent, waiting, dead]])).map((r) => r.id);
      expect(left).toEqual([recent, waiting, dead]);
    } finally {
      fails = () => false;
    }
  });
});


/**
 * The relay running on its own (LISTEN/NOTIFY, its poll every 5 s): what it
 * claims for, counted by the proxy. Its checks read PostgreSQL directly (not
 * through the proxy), so the proxy counts only the app's statements.
 */
describe('Outbox relay wake-ups (PostgreSQL, the relay running)', () => {
  let app: INestApplication;
  let db: { url: string; drop(): Promise<void> };
  let proxy: PgCountingProxy;
  let close: () => Promise<void>;
  let direct: Client;
  /** Each delivery's message id and attempt, with the moment it reached the publisher. */
  const published: { id: string; attempt: number; at: number }[] = [];
  let fails: (m: OutboxMessage) => { retryAfterMs: number } | undefined = () => undefined;
  let slow: (m: OutboxMessage) => Promise<void> | undefined = () => undefined;

  beforeAll(async () => {
    ({ app, db, proxy, close } = await outboxApp({
      publish: async (message) => {
        published.push({ id: message.id, attempt: message.attempt, at: performance.now() });
        await slow(message);
        const refusal = fails(message);
        if (refusal) throw Object.assign(new Error(`refused ${message.id}`), refusal);
      },
    }));
    direct = new Client({ connectionString: db.url });
    await direct.connect();
  });
  afterAll(async () => {
    await direct?.end();
    await close?.();
  });

  const add = (entries: { stream?: string; lane?: string; payload?: { n: string } }[]) =>
    addIn(app, entries.map((e) => ({ topic: 'woken', payload: { n: randomUUID() }, ...e })));
  const undelivered = async (ids: string[]) =>
    (await direct.query<{ n: number }>('SELECT count(*)::int AS n FROM idempotency_outbox WHERE id = ANY($1::uuid[]) AND delivered_at IS NULL', [ids])).rows[0].n;
  /** Resolves once every message of `ids` is marked delivered; rejects after `ms` (under the relay's poll of 5 s). */
  const deliveredWithin = async (ids: string[], ms: number) => {
    const deadline = performance.now() + ms;
    while ((await undelivered(ids)) > 0) {
      if (performance.now() > deadline) throw new Error(`${await undelivered(ids)} of ${ids.length} messages undelivered after ${ms} ms`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  const settle = () => new Promise((r) => setTimeout(r, 150));

  it('claims once per delivery when nothing else is due: a freed slot does not claim again', async () => {
    await deliveredWithin(await add([{}]), 2_000);
    await settle();
    const n = 10;
    const before = proxy.counts().statements;
    const started = performance.now();
    for (let i = 0; i < n; i++) {
      await deliveredWithin(await add([{}]), 4_000);
      await settle(); // time for a claim that a freed slot would start
    }
    // The relay's poll (every 5 s) claims too: once per 5 s begun, and once more for the phase it started in.
    const polls = Math.ceil((performance.now() - started) / 5_000) + 1;
    // Per message: BEGIN, the INSERT and COMMIT of the adder; the relay's claim and mark.
    const relayStatements = proxy.counts().statements - before - 3 * n;
    expect(relayStatements).toBeGreaterThanOrEqual(2 * n);
    expect(relayStatements).toBeLessThanOrEqual(2 * n + polls);
  });

  it('hands a failed message over again when its retry comes due, not at the poll', async () => {
    // By its payload: the relay may hand it over before `add` has answered its id.
    const n = randomUUID();
    fails = (m) => ((m.payload as { n?: string }).n === n && m.attempt === 1 ? { retryAfterMs: 300 } : undefined);
    const [id] = await add([{ payload: { n } }]);
    try {
      await deliveredWithin([id], 2_500);
    } finally {
      fails = () => undefined;
    }
    const attempts = published.filter((m) => m.id === id);
    expect(attempts.map((m) => m.attempt)).toEqual([1, 2]);
    expect(attempts[1].at - attempts[0].at).toBeGreaterThanOrEqual(250);
  });

  it("claims a capped lane's next messages when one of its deliveries ends, while other lanes' ends claim nothing", async () => {
    const lane = `capped-${randomUUID()}`;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    // Held by payload, set before they are added: the relay may hand them over before `add` has answered their ids.
    slow = (m) => ((m.payload as { n?: string }).n === lane ? released : undefined);
    const held = await add(Array.from({ length: RELAY_LANE_CAP + 2 }, () => ({ lane, payload: { n: lane } })));
    try {
      await waitFor("the lane's cap of deliveries to reach the publisher", () => published.filter((m) => held.includes(m.id)).length >= RELAY_LANE_CAP);
      // Another lane's message goes meanwhile; its end finds only the capped lane's, held back.
      await deliveredWithin(await add([{ lane: `other-${randomUUID()}` }]), 4_000);
      expect(published.filter((m) => held.includes(m.id))).toHaveLength(RELAY_LANE_CAP);
      release();
      await deliveredWithin(held, 4_000);
    } finally {
      slow = () => undefined;
      release();
    }
  });

  it('frees a slot when the publisher answers: a delivery goes while the marks before it wait', async () => {
    const tag = `held-${randomUUID()}`;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    // Held by payload, set before they are added (as above).
    slow = (m) => ((m.payload as { n?: string }).n === tag ? released : undefined);
    const held = await add(Array.from({ length: RELAY_SLOTS }, () => ({ payload: { n: tag } })));
    // Another session locks the held messages' rows: their marks wait for it.
    const locker = new Client({ connectionString: db.url });
    await locker.connect();
    let next: string[] = [];
    try {
      await waitFor('every slot to hold a delivery', () => published.filter((m) => held.includes(m.id)).length >= RELAY_SLOTS);
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM idempotency_outbox WHERE id = ANY($1::uuid[]) FOR UPDATE', [held]);
      release();
      next = await add([{}]);
      // The marks stay blocked until the locker lets go (below): the delivery cannot be waiting for them.
      await waitFor('the next delivery to reach the publisher', () => published.some((m) => m.id === next[0]));
      expect(await undelivered(held)).toBe(RELAY_SLOTS);
    } finally {
      slow = () => undefined;
      release();
      await locker.query('ROLLBACK');
      await locker.end();
    }
    await deliveredWithin([...held, ...next], 4_000);
  });

  it("claims again when a delivery of a lane ends during a claim that fills it: the lane's next goes before the poll", async () => {
    // A claim starts with 3 of the lane's deliveries in flight, takes 1 of its 2 due (the cap),
    // and one of the 3 ends while it runs: the second due is then free to go, and nothing else will wake the relay.
    const lane = `during-${randomUUID()}`;
    const retryMs = 4_000;
    const releases = new Map<string, () => void>();
    const holds = new Map(['held-1', 'held-2', 'held-3'].map((n) => [n, new Promise<void>((resolve) => releases.set(n, resolve))]));
    // Each message of the lane by its payload, `${lane}:${tag}`: the relay may hand it over before `add` has answered its id.
    const tagOf = (m: OutboxMessage) => (m.payload as { n?: string }).n?.split(`${lane}:`)[1];
    slow = (m) => holds.get(tagOf(m) ?? '');
    fails = (m) => (tagOf(m)?.startsWith('later') && m.attempt === 1 ? { retryAfterMs: retryMs } : undefined);
    const entry = (tag: string) => ({ lane, payload: { n: `${lane}:${tag}` } });
    const held: QueryRunner[] = [];
    try {
      // Two of the lane's messages fail once and come due again in retryMs; three more hold the lane's slots but one.
      const later = await add([entry('later-a'), entry('later-b')]);
      const failedOnce = async () =>
        (await direct.query<{ n: number }>('SELECT count(*)::int AS n FROM idempotency_outbox WHERE id = ANY($1::uuid[]) AND attempts = 1 AND next_attempt_at > now()', [later])).rows[0].n;
      await waitFor('both to fail once', async () => (await failedOnce()) === 2);
      const inFlight = await add(['held-1', 'held-2', 'held-3'].map(entry));
      await waitFor('the three to reach the publisher', () => published.filter((m) => inFlight.includes(m.id)).length === 3);
      // Every connection of the app's pool (node-postgres's default, 10) held: the claim that comes at the retry waits for one.
      const dataSource = app.get(DataSource);
      for (let i = 0; i < 10; i++) {
        const runner = dataSource.createQueryRunner();
        await runner.connect();
        held.push(runner);
      }
      const [{ ms }] = (await direct.query<{ ms: number }>('SELECT ceil(extract(epoch FROM max(next_attempt_at) - now()) * 1000)::int AS ms FROM idempotency_outbox WHERE id = ANY($1::uuid[])', [later])).rows;
      await new Promise((r) => setTimeout(r, Math.max(0, ms) + 500));
      expect(published.filter((m) => later.includes(m.id) && m.attempt === 2)).toHaveLength(0); // the claim waits
      releases.get('held-1')!();
      await new Promise((r) => setTimeout(r, 100));
      const freedAt = performance.now();
      await Promise.all(held.splice(0).map((runner) => runner.release()));
      await waitFor('both to be handed over again', () => published.filter((m) => later.includes(m.id) && m.attempt === 2).length === 2);
      // Under the relay's poll (5 s): the second came with a claim of its own, not with the poll.
      expect(published.filter((m) => later.includes(m.id) && m.attempt === 2 && m.at - freedAt < 2_500)).toHaveLength(2);
      for (const release of releases.values()) release();
      await deliveredWithin([...later, ...inFlight], 4_000);
    } finally {
      await Promise.all(held.map((runner) => runner.release()));
      for (const release of releases.values()) release();
      slow = () => undefined;
      fails = () => undefined;
    }
  });

  it('claims again within a second after a claim that failed, not at the poll', async () => {
    // A message comes due again (its retry) while its claim waits on a lock, and that claim fails (its session ended).
    const n = randomUUID();
    fails = (m) => ((m.payload as { n?: string }).n === n && m.attempt === 1 ? { retryAfterMs: 1_000 } : undefined);
    const locker = new Client({ connectionString: db.url });
    await locker.connect();
    try {
      const [id] = await add([{ payload: { n } }]);
      await waitFor('the first attempt to be marked failed', async () => (await direct.query('SELECT 1 FROM idempotency_outbox WHERE id = $1 AND last_error IS NOT NULL', [id])).rowCount === 1);
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE idempotency_outbox IN ACCESS EXCLUSIVE MODE');
      const [{ pid }] = await waitFor('the claim at the retry to wait on the lock', async () => {
        const { rows } = await direct.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%WITH RECURSIVE lanes%'",
        );
        return rows.length > 0 ? rows : undefined;
      });
      await direct.query('SELECT pg_terminate_backend($1)', [pid]);
      const failedAt = performance.now();
      await locker.query('ROLLBACK');
      const second = await waitFor('the retry to be handed over', () => published.find((m) => m.id === id && m.attempt === 2));
      // Under the relay's poll (5 s): the failed claim is tried again as a relay that polls would.
      expect(second.at - failedAt).toBeLessThan(2_500);
    } finally {
      fails = () => undefined;
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
    }
  });

  it('frees the slots of a publisher that never answers at twice the lease: the others go, and shutdown does not wait for ever', async () => {
    const handed: { id: string; attempt: number }[] = [];
    const hanging = await outboxApp({
      lease: '500ms',
      // Tagged `hang`: ignores the lease's signal, and never settles.
      publish: (message) => {
        handed.push({ id: message.id, attempt: message.attempt });
        return (message.payload as { hang?: boolean }).hang ? new Promise<never>(() => undefined) : Promise.resolve();
      },
    });
    let closed = false;
    try {
      const addTo = (payloads: { hang?: boolean }[]) => addIn(hanging.app, payloads.map((payload) => ({ topic: 'hanging', payload })));
      const lastError = async (id: string) =>
        ((await hanging.app.get(DataSource).query('SELECT last_error FROM idempotency_outbox WHERE id = $1', [id])) as { last_error: string | null }[])[0].last_error;
      const hung = await addTo(Array.from({ length: RELAY_SLOTS }, () => ({ hang: true })));
      await waitFor('every slot to hold a hung delivery', () => new Set(handed.filter((m) => hung.includes(m.id)).map((m) => m.id)).size === RELAY_SLOTS);
      const [next] = await addTo([{}]);
      await waitFor('a message added after them to be handed over', () => handed.some((m) => m.id === next));
      expect(await lastError(hung[0])).toBe("the publisher did not answer within twice the relay's lease (500 ms)");
      await Promise.race([
        hanging.close().then(() => (closed = true)),
        new Promise((_, reject) => setTimeout(() => reject(new Error('shutdown still waits for the hung deliveries after 10 s')), 10_000)),
      ]);
    } finally {
      // A shutdown that waits for ever: its connections cut, so that the run can end (the database is left).
      if (!closed) {
        void hanging.close().catch(() => undefined);
        await hanging.proxy.close();
      }
    }
  });

  it('ends its wait within a second when its listener is lost: what is added before it listens again goes then, not at the poll', async () => {
    await deliveredWithin(await add([{}]), 2_000);
    await settle(); // the relay waits now, for its poll of 5 s
    const listeners = async () =>
      (await direct.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'safe-retries-outbox' AND datname = current_database()")).rows[0].n;
    const lost = await direct.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'safe-retries-outbox' AND datname = current_database()");
    expect(lost.rowCount).toBe(1);
    const addedAt = performance.now();
    const [id] = await add([{}]);
    const handedOver = await waitFor('the message added while no listener listened', () => published.find((m) => m.id === id));
    // Under the relay's poll (5 s): the lost listener ended the wait.
    expect(handedOver.at - addedAt).toBeLessThan(2_500);
    await waitFor('a listener again', async () => (await listeners()) === 1);
  });

  it('waits at most a second while it cannot listen (a standby refuses LISTEN), and keeps no session it could not use', async () => {
    const cluster = await startPostgres({ replica: {} });
    const handed: { id: string; at: number }[] = [];
    const deaf = await outboxApp(
      {
        publish: async (message) => {
          handed.push({ id: message.id, at: performance.now() });
        },
      },
      [],
      { listenUrl: cluster.replica!.url('postgres') },
    );
    const standby = new Client({ connectionString: cluster.replica!.url('postgres') });
    await standby.connect();
    try {
      const addTo = async () => (await addIn(deaf.app, [{ topic: 'unheard', payload: {} }]))[0];
      const first = await addTo();
      await waitFor('the first message', () => handed.some((m) => m.id === first));
      await settle(); // the relay waits now
      const addedAt = performance.now();
      const second = await addTo();
      const handedOver = await waitFor('the second message', () => handed.find((m) => m.id === second));
      // Under the poll of a relay that listens (5 s): it polls as one that cannot.
      expect(handedOver.at - addedAt).toBeLessThan(2_500);
      // One attempt to listen a second, each refused: none of their sessions stays (a sample may meet one being closed).
      await new Promise((r) => setTimeout(r, 2_000));
      const sessions: number[] = [];
      for (let i = 0; i < 5; i++) {
        sessions.push((await standby.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'safe-retries-outbox'")).rows[0].n);
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(Math.min(...sessions)).toBe(0);
    } finally {
      await standby.end();
      await deaf.close();
      await cluster.destroy();
    }
  });

  it("claims a stream's next message when the one before it is delivered", async () => {
    const stream = `stream-${randomUUID()}`;
    const ids = await add(Array.from({ length: 5 }, () => ({ stream })));
    await deliveredWithin(ids, 4_000);
    expect(published.filter((m) => ids.includes(m.id)).map((m) => ids.indexOf(m.id))).toEqual([0, 1, 2, 3, 4]);
  });
});
