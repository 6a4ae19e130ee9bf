import { randomUUID } from 'node:crypto';
import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Client } from 'pg';
import { Registry } from 'prom-client';
import { DataSource } from 'typeorm';
import { IdempotencyModule, IdempotencyModuleOptions, IdempotencyPurgeService, transactionalClsModule } from 'safe-retries';
import { idempotencyMigrations } from 'safe-retries/migrations';
import { IdempotentConsumer, InvalidMessageIdError } from 'safe-retries/messages';
import { IDEMPOTENCY_OPTIONS } from 'safe-retries/swagger';
import { TestDatabase, countRows, createDatabase } from '../support/test-services';
import { waitFor } from '../support/wait-for';

/**
 * IdempotentConsumer in a Nest app that has nothing but TypeORM, nestjs-cls and
 * the module (as any app that installs the library): a message's effect commits
 * at most once per (source, message id), in the same transaction as its record.
 */
interface ConsumerApp {
  app: INestApplication;
  db: TestDatabase;
  dataSource: DataSource;
  consumer: IdempotentConsumer;
  txHost: TransactionHost<TransactionalAdapterTypeOrm>;
  /** The module's metrics (its `registry`). */
  registry: Registry;
  close(): Promise<void>;
}

async function createConsumerApp(options: IdempotencyModuleOptions = {}): Promise<ConsumerApp> {
  const db = await createDatabase();
  const registry = new Registry();
  const moduleRef = await Test.createTestingModule({
    imports: [
      TypeOrmModule.forRoot({
        type: 'postgres',
        url: db.url,
        migrations: idempotencyMigrations(undefined, options.messages?.tableName),
        migrationsRun: true,
        // Room for ten transactions at once, one of them holding the claim the others wait for.
        poolSize: 20,
      }),
      transactionalClsModule(),
      IdempotencyModule.forRoot({ registry, ...options, purge: { enabled: false, ...options.purge }, recovery: { enabled: false } }),
    ],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  const dataSource = app.get(DataSource);
  await dataSource.query('CREATE TABLE consumer_effects (id serial PRIMARY KEY, source text NOT NULL, message_id text NOT NULL)');
  return {
    app,
    db,
    dataSource,
    consumer: app.get(IdempotentConsumer),
    txHost: app.get(TransactionHost),
    registry,
    close: async () => {
      await app.close();
      await db.drop();
    },
  };
}

describe('IdempotentConsumer: a message processed exactly once (e2e)', () => {
  let t: ConsumerApp;
  /** The effect under test: one row written through the ambient transaction. */
  const write = (source: string, messageId: string) =>
    t.txHost.tx.query('INSERT INTO consumer_effects (source, message_id) VALUES ($1, $2)', [source, messageId]);
  const effects = (messageId: string) => countRows(t.dataSource, 'consumer_effects', 'message_id = $1', [messageId]);
  const recorded = (messageId: string) => countRows(t.dataSource, 'idempotency_messages', 'message_id = $1', [messageId]);

  beforeAll(async () => {
    t = await createConsumerApp({ purge: { batchSize: 2 } });
  });
  afterAll(() => t.close());

  it('runs the effect on the first delivery and never on a redelivery; another source is another message', async () => {
    const id = `evt_${randomUUID()}`;
    const effect = jest.fn(async () => {
      await write('card-network', id);
      return { handled: id };
    });
    await expect(t.consumer.process('card-network', id, effect)).resolves.toEqual({ processed: true, result: { handled: id } });
    await expect(t.consumer.process('card-network', id, effect)).resolves.toEqual({ processed: false });
    expect(effect).toHaveBeenCalledTimes(1);
    expect(await effects(id)).toBe(1);

    await expect(t.consumer.process('orders-queue', id, () => write('orders-queue', id).then(() => 'again'))).resolves.toEqual({
      processed: true,
      result: 'again',
    });
    expect(await effects(id)).toBe(2);
    expect(await recorded(id)).toBe(2);
  });

  it('records the message with its retention on the database clock (7d by default)', async () => {
    const id = `evt_${randomUUID()}`;
    await t.consumer.process('card-network', id, () => write('card-network', id));
    const [row] = await t.dataSource.query<{ retained: boolean; recent: boolean }[]>(
      `SELECT expires_at - processed_at = interval '7 days' AS retained, processed_at > now() - interval '1 minute' AS recent
         FROM idempotency_messages WHERE source = 'card-network' AND message_id = $1`,
      [id],
    );
    expect(row).toEqual({ retained: true, recent: true });
  });

  it('counts processed messages and duplicates', async () => {
    const messages = t.registry.getSingleMetric('idempotency_messages_total')!;
    const value = async (result: string) => (await messages.get()).values.find((v) => v.labels.result === result)?.value ?? 0;
    const [processed, duplicate] = [await value('processed'), await value('duplicate')];
    const id = `evt_${randomUUID()}`;
    await t.consumer.process('card-network', id, () => write('card-network', id));
    await t.consumer.process('card-network', id, () => write('card-network', id));
    expect([await value('processed'), await value('duplicate')]).toEqual([processed + 1, duplicate + 1]);
  });

  /** Sessions of the test database waiting on another transaction (the duplicates, on the claim's primary key). */
  const waitingOnATransaction = async (observer: Client) =>
    (
      await observer.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'transactionid'`,
      )
    ).rows[0].n;

  it('runs the effect once for ten concurrent deliveries: the duplicates wait for the first to commit, then skip', async () => {
    // Each call is its own transaction in its own nestjs-cls context (none is active
    // here, so each withTransaction opens both). Every effect that starts holds its
    // transaction open until all ten deliveries are in flight: either running the
    // effect or seen waiting on a claim in PostgreSQL. Without the claim (checked by
    // hand: the claim statement replaced by a `SELECT 1 AS claimed`) all ten run the
    // effect and the counts below are 10.
    const id = `evt_${randomUUID()}`;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let started = 0;
    const observer = new Client({ connectionString: t.db.url });
    await observer.connect();
    try {
      const deliveries = Array.from({ length: 10 }, (_, i) =>
        t.consumer.process('card-network', id, async () => {
          started += 1;
          await write('card-network', id);
          await gate;
          return i;
        }),
      );
      await waitFor('all ten deliveries in flight', async () => started + (await waitingOnATransaction(observer)) === 10);
      open();
      expect(started).toBe(1);
      const results = await Promise.all(deliveries);
      expect(results.filter((r) => r.processed)).toHaveLength(1);
      expect(results.filter((r) => !r.processed)).toHaveLength(9);
      expect(await effects(id)).toBe(1);
      expect(await recorded(id)).toBe(1);
    } finally {
      open();
      await observer.end();
    }
  });

  it('lets a waiting duplicate process the message when the first delivery rolls back', async () => {
    const id = `evt_${randomUUID()}`;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let calls = 0;
    const observer = new Client({ connectionString: t.db.url });
    await observer.connect();
    try {
      const deliveries = Array.from({ length: 3 }, () =>
        t.consumer
          .process('card-network', id, async () => {
            calls += 1;
            await write('card-network', id);
            if (calls > 1) return 'second';
            await gate;
            throw new Error('the first delivery fails');
          })
          .then(
            (r) => r,
            (error: Error) => error.message,
          ),
      );
      await waitFor('two duplicates to wait on the claim', async () => (await waitingOnATransaction(observer)) === 2);
      open();
      const results = await Promise.all(deliveries);
      expect(results).toEqual(expect.arrayContaining(['the first delivery fails', { processed: true, result: 'second' }, { processed: false }]));
      expect(calls).toBe(2);
      expect(await effects(id)).toBe(1);
      expect(await recorded(id)).toBe(1);
    } finally {
      open();
      await observer.end();
    }
  });

  it('records nothing when the effect throws, so a redelivery runs the effect', async () => {
    const id = `evt_${randomUUID()}`;
    const failure = new Error('the provider is down');
    await expect(
      t.consumer.process('card-network', id, async () => {
        await write('card-network', id);
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(await recorded(id)).toBe(0);
    expect(await effects(id)).toBe(0);

    await expect(t.consumer.process('card-network', id, () => write('card-network', id).then(() => 'redelivered'))).resolves.toEqual({
      processed: true,
      result: 'redelivered',
    });
    expect(await recorded(id)).toBe(1);
    expect(await effects(id)).toBe(1);
  });

  it("joins the caller's transaction: the caller's rollback undoes the claim with the effect", async () => {
    const id = `evt_${randomUUID()}`;
    await expect(
      t.txHost.withTransaction(async () => {
        await expect(t.consumer.process('card-network', id, () => write('card-network', id))).resolves.toMatchObject({ processed: true });
        // Inside the same transaction the message is already processed.
        await expect(t.consumer.process('card-network', id, () => write('card-network', id))).resolves.toEqual({ processed: false });
        throw new Error('the caller rolls back');
      }),
    ).rejects.toThrow('the caller rolls back');
    expect(await recorded(id)).toBe(0);
    expect(await effects(id)).toBe(0);

    await expect(t.consumer.process('card-network', id, () => write('card-network', id))).resolves.toMatchObject({ processed: true });
    expect(await effects(id)).toBe(1);
  });

  it.each([
    ['an empty source', '', 'evt_1', /the source is empty/],
    ['an empty message id', 'card-network', '', /the messageId is empty/],
    ['a message id of 256 characters', 'card-network', 'x'.repeat(256), /the messageId has 256 characters/],
    ['a source of 256 characters', 's'.repeat(256), 'evt_1', /the source has 256 characters/],
    ['a message id with NUL', 'card-network', 'evt\u00001', /the messageId contains a NUL character/],
    ['a message id that is not a string', 'card-network', 42 as unknown as string, /the messageId is number, not a string/],
  ])('refuses %s before touching the database', async (_case, source, messageId, reason) => {
    const effect = jest.fn(async () => undefined);
    const before = await countRows(t.dataSource, 'idempotency_messages');
    const refused = t.consumer.process(source, messageId, effect);
    await expect(refused).rejects.toThrow(InvalidMessageIdError);
    await expect(refused).rejects.toThrow(reason);
    expect(effect).not.toHaveBeenCalled();
    expect(await countRows(t.dataSource, 'idempotency_messages')).toBe(before);
  });

  it('accepts a source and a message id of 255 characters', async () => {
    await expect(t.consumer.process('s'.repeat(255), 'x'.repeat(255), async () => 'ok')).resolves.toEqual({ processed: true, result: 'ok' });
  });

  it('is purged past its retention (database clock), in batches, with the keys; unexpired messages stay', async () => {
    const purger = t.app.get(IdempotencyPurgeService);
    await purger.purgeOnce(); // nothing of the earlier tests has expired: a clean start
    const expired = Array.from({ length: 5 }, () => `evt_${randomUUID()}`);
    const kept = `evt_${randomUUID()}`;
    for (const id of [...expired, kept]) await t.consumer.process('card-network', id, async () => undefined);
    await t.dataSource.query(`UPDATE idempotency_messages SET expires_at = now() - interval '1 second' WHERE message_id = ANY($1)`, [expired]);

    const result = await purger.purgeOnce();
    // batchSize 2: one short batch of keys and of the outbox, then messages in batches of 2, 2 and 1.
    expect(result).toEqual({ deleted: 0, messages: 5, outbox: 0, batches: 5, durationMs: expect.any(Number), skipped: false });
    expect(await countRows(t.dataSource, 'idempotency_messages', 'message_id = ANY($1)', [expired])).toBe(0);
    expect(await recorded(kept)).toBe(1);
    const purged = (await t.registry.getSingleMetric('idempotency_purge_deleted_messages_total')!.get()).values[0].value;
    expect(purged).toBeGreaterThanOrEqual(5);

    // Gone past its retention, a redelivery is a new message; the kept one is still a duplicate.
    await expect(t.consumer.process('card-network', expired[0], async () => 'again')).resolves.toEqual({ processed: true, result: 'again' });
    await expect(t.consumer.process('card-network', kept, async () => 'again')).resolves.toEqual({ processed: false });
  });
});

describe('IdempotentConsumer options (e2e)', () => {
  it('keeps its messages in the table named by messages.tableName, with that retention, and purges it', async () => {
    const table = 'Processed Messages';
    const t = await createConsumerApp({ messages: { tableName: table, retention: '1h' } });
    try {
      const id = `evt_${randomUUID()}`;
      await expect(t.consumer.process('queue', id, async () => 1)).resolves.toEqual({ processed: true, result: 1 });
      await expect(t.consumer.process('queue', id, async () => 2)).resolves.toEqual({ processed: false });
      const [row] = await t.dataSource.query<{ retained: boolean }[]>(
        `SELECT expires_at - processed_at = interval '1 hour' AS retained FROM "Processed Messages" WHERE message_id = $1`,
        [id],
      );
      expect(row).toEqual({ retained: true });
      const indexes = await t.dataSource.query<{ indexname: string }[]>(`SELECT indexname FROM pg_indexes WHERE tablename = $1 ORDER BY indexname`, [table]);
      expect(indexes.map((i) => i.indexname)).toEqual(['Processed Messages_expires_at_idx', 'Processed Messages_pkey']);

      await t.dataSource.query(`UPDATE "Processed Messages" SET expires_at = now() - interval '1 second'`);
      await expect(t.app.get(IdempotencyPurgeService).purgeOnce()).resolves.toMatchObject({ messages: 1, skipped: false });
      expect(await countRows(t.dataSource, '"Processed Messages"')).toBe(0);
    } finally {
      await t.close();
    }
  });

  it('resolves the defaults and refuses what cannot work, at startup', async () => {
    // The module's options as its startup resolves them; its data source is never connected.
    const compile = (messages?: IdempotencyModuleOptions['messages']) =>
      Test.createTestingModule({
        imports: [
          TypeOrmModule.forRoot({ type: 'postgres', url: process.env.TEST_ADMIN_DATABASE_URL, manualInitialization: true }),
          IdempotencyModule.forRoot({ messages }),
        ],
      }).compile();
    const o = (await compile()).get(IDEMPOTENCY_OPTIONS);
    expect(o.messages.table.sql).toBe('"idempotency_messages"');
    expect(o.messages.retentionMs).toBe(7 * 24 * 3_600_000);
    await expect(compile({ retention: 0 })).rejects.toThrow('IdempotencyModule: messages.retention must be longer than 0');
    await expect(compile({ retention: 'a week' })).rejects.toThrow(/invalid duration "a week"/);
    await expect(compile({ tableName: 'a.b.c' })).rejects.toThrow(/messages.tableName "a.b.c" must be "table" or "schema.table"/);
  });
});
