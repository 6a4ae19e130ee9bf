import { randomUUID } from 'node:crypto';
import { Controller, ModuleMetadata, Module, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsModule } from 'nestjs-cls';
import { DataSource } from 'typeorm';
import { Redis } from 'ioredis';
import request from 'supertest';
import { IdempotencyModule, IdempotencyPurgeService, IdempotencyRecovery, Idempotent, transactionalClsModule } from 'safe-retries';
import { idempotencyMigrations } from 'safe-retries/migrations';
import { Outbox } from 'safe-retries/outbox';
import { RedisIdempotencyStore } from 'safe-retries/redis';
import { idempotencyStoreOf } from 'safe-retries/testing';
import { keyId } from '../support/keys-table';
import { LIBRARY_TABLE, LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from '../support/library-app';
import { TestDatabase, countRows, createDatabase, hasRedis, redisUrl } from '../support/test-services';
import { waitFor } from '../support/wait-for';
import { MISSING_KEY_PROBLEM } from '../support/problems';

/**
 * The idempotency module on its own, in an app with Nest's default exception
 * filter: its problems are complete problem+json responses without any help
 * from the app (code, Link, Retry-After), and a route works exactly-once.
 */
describe.each(['express', 'fastify'] as const)('the idempotency module as a library, on %s (e2e)', (platform) => {
  const KEYS = `"${LIBRARY_TABLE}"`;
  let t: LibraryApp;
  const post = (key: string | undefined, body: object, principal: string | null = 'acct_9f3') => {
    let r = request(t.app.getHttpServer()).post('/lib/widgets').send(body);
    if (principal !== null) r = r.set(PRINCIPAL_HEADER, principal);
    return key === undefined ? r : r.set('Idempotency-Key', key);
  };
  const widgets = (name: string) => countRows(t.dataSource, 'lib_widgets', 'name = $1', [name]);

  beforeAll(async () => {
    t = await createLibraryApp(platform);
  });
  afterAll(() => t.close());

  it('runs the first request once and replays it byte for byte', async () => {
    const key = randomUUID();
    const first = await post(key, { name: 'lib-once' }).expect(201);
    expect(first.headers['location']).toBe(`/lib/widgets/${first.body.id}`);
    const replay = await post(key, { name: 'lib-once' }).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    expect(await widgets('lib-once')).toBe(1);
  });

  it.each(['acct_9f3', '42', randomUUID()])('works exactly-once for the principal %s, apart from any other', async (principal) => {
    const key = randomUUID();
    const name = `lib-scope-${principal}`;
    const first = await post(key, { name }, principal).expect(201);
    const replay = await post(key, { name }, principal).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    const other = await post(key, { name }, `${principal}-other`).expect(201);
    expect(other.headers['idempotent-replayed']).toBeUndefined();
    expect(await widgets(name)).toBe(2);
    expect(await countRows(t.dataSource, KEYS, 'id = $1', [keyId(principal, key)])).toBe(1);
  });

  it.each([
    ['no principal', null],
    ['an empty principal', ''],
    ['a principal longer than 255 characters', 'p'.repeat(256)],
  ])('answers 500 and writes nothing for %s', async (_case, principal) => {
    const keys = await countRows(t.dataSource, KEYS);
    await post(randomUUID(), { name: 'lib-no-scope' }, principal).expect(500);
    expect(await widgets('lib-no-scope')).toBe(0);
    expect(await countRows(t.dataSource, KEYS)).toBe(keys);
  });

  it('accepts a 255-character principal', async () => {
    await post(randomUUID(), { name: 'lib-long-scope' }, 'p'.repeat(255)).expect(201);
  });

  it('runs a phased route once and replays it byte for byte', async () => {
    const key = randomUUID();
    const r = () => request(t.app.getHttpServer()).post('/lib/phased').set(PRINCIPAL_HEADER, '42').set('Idempotency-Key', key).send({ name: 'lib-phased' });
    const first = await r().expect(201);
    expect(first.body).toMatchObject({ name: 'lib-phased', phased: true });
    expect(first.headers['location']).toBe(`/lib/widgets/${first.body.id}`);
    const replay = await r().expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(replay.headers['location']).toBe(first.headers['location']);
    expect(await widgets('lib-phased')).toBe(1);
  });

  it("keeps a token shown once out of the keys table (replay), and replays it rebuilt from the app's own table, byte for byte", async () => {
    const key = randomUUID();
    const r = (name = 'lib-token') => request(t.app.getHttpServer()).post('/lib/tokens').set(PRINCIPAL_HEADER, '42').set('Idempotency-Key', key).send({ name });
    const first = await r().expect(201);
    expect(first.body).toEqual({ id: expect.any(String), name: 'lib-token', token: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const [row] = await t.dataSource.query<{ status: number; body: string; headers: string | null }[]>(`SELECT status, body, headers FROM ${KEYS} WHERE id = $1`, [
      keyId('42', key),
    ]);
    expect(row.status).toBe(201);
    expect(JSON.parse(row.body)).toEqual({ id: first.body.id, name: 'lib-token' });
    expect(JSON.stringify(row)).not.toContain(first.body.token);
    for (let i = 0; i < 2; i++) {
      const replay = await r().expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.headers['content-type']).toBe(first.headers['content-type']);
      expect(replay.text).toBe(first.text);
    }
    expect((await r('lib-token-other').expect(422)).body).toMatchObject({ code: 'idempotency_key_reused' });
    expect(await countRows(t.dataSource, 'lib_tokens', 'scope = $1 AND id = $2', ['42', first.body.id])).toBe(1);
    expect(await countRows(t.dataSource, 'lib_tokens', 'name = $1', ['lib-token-other'])).toBe(0);
  });

  it("leaves the COMMIT to the app when the phases run in the app's own transaction", async () => {
    const key = randomUUID();
    const r = () => request(t.app.getHttpServer()).post('/lib/outer').set(PRINCIPAL_HEADER, '42').set('Idempotency-Key', key).send({ name: 'lib-outer' });
    // A COMMIT sent with finish()'s completion would end the app's transaction: its next statement would fail (500).
    const first = await r().expect(201);
    expect(await widgets('lib-outer')).toBe(1);
    expect(await widgets('lib-outer: after finish()')).toBe(1);
    const replay = await r().expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
  });

  it('answers 400 without a key as problem+json, the same bytes the app sends', async () => {
    const res = await post(undefined, { name: 'lib-missing' }).expect(400);
    expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(res.text).toBe(MISSING_KEY_PROBLEM);
    expect(res.headers['link']).toBe('</docs/idempotency>; rel="describedby"');
    expect(await widgets('lib-missing')).toBe(0);
  });

  it('answers 400 idempotency_key_invalid for a malformed key', async () => {
    const res = await post('"unterminated', { name: 'lib-invalid' }).expect(400);
    expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(res.body).toMatchObject({ status: 400, code: 'idempotency_key_invalid', type: '/docs/idempotency#idempotency_key_invalid' });
  });

  it('answers 422 idempotency_key_reused for another body', async () => {
    const key = randomUUID();
    await post(key, { name: 'lib-one' }).expect(201);
    const res = await post(key, { name: 'lib-two' }).expect(422);
    expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(res.body).toMatchObject({ status: 422, code: 'idempotency_key_reused', title: 'Idempotency-Key Reused' });
    expect(res.headers['link']).toBe('</docs/idempotency>; rel="describedby"');
    expect(await widgets('lib-two')).toBe(0);
  });

  it('answers 409 with Retry-After while the first request runs, then replays it', async () => {
    const key = randomUUID();
    const slow = post(key, { name: 'lib-slow', delay_ms: 1000 }).then((r) => r);
    await waitFor('the claim', async () => (await countRows(t.dataSource, KEYS, 'id = $1', [keyId('acct_9f3', key)])) > 0);
    const dup = await post(key, { name: 'lib-slow', delay_ms: 1000 }).expect(409);
    expect(dup.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(dup.body).toMatchObject({ status: 409, code: 'idempotency_request_in_progress' });
    expect(dup.headers['retry-after']).toBe('1');
    expect(dup.headers['link']).toBe('</docs/idempotency>; rel="describedby"');
    const first = await slow;
    expect(first.status).toBe(201);
    expect((await post(key, { name: 'lib-slow', delay_ms: 1000 }).expect(201)).text).toBe(first.text);
    expect(await widgets('lib-slow')).toBe(1);
  });

  it('keeps its keys only in the configured table, and purges that table', async () => {
    expect((await t.dataSource.query(`SELECT to_regclass('idempotency_keys') AS t`))[0].t).toBeNull();
    await t.dataSource.query(
      `INSERT INTO ${KEYS} (id, fingerprint, lease, expires_at, status, body) VALUES ($1, '\\x00112233445566778899aabbccddeeff', 0, now() - interval '1 minute', 201, '{}')`,
      [keyId('42', 'old')],
    );
    expect(await t.app.get(IdempotencyPurgeService).purgeOnce()).toMatchObject({ deleted: 1, skipped: false });
    expect(await countRows(t.dataSource, KEYS, 'id = $1', [keyId('42', 'old')])).toBe(0);
  });
});

describe('the idempotency module at startup (e2e)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(() => db.drop());

  const compile = (imports: ModuleMetadata['imports'], connect: boolean, url = db.url) =>
    Test.createTestingModule({
      imports: [TypeOrmModule.forRoot({ type: 'postgres', url, manualInitialization: !connect }), ...(imports ?? [])],
    }).compile();
  const boot = (imports: ModuleMetadata['imports'], url?: string) => compile(imports, true, url);
  // A boot that is meant to fail: its data source is never connected, so nothing
  // of it (a pool, TypeORM's connection retries) outlives the rejected compile.
  const refused = (imports: ModuleMetadata['imports']) => compile(imports, false);

  const tables = async (moduleRef: { get(token: typeof DataSource): DataSource }) =>
    (await moduleRef.get(DataSource).query<{ t: string }[]>(`SELECT to_regclass('idempotency_keys') AS t UNION ALL SELECT to_regclass('idempotency_messages')`)).map((r) => r.t);

  it('brings its transactions, jobs and tables: the app imports nothing else', async () => {
    const moduleRef = await boot([IdempotencyModule.forRoot({})]);
    const app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    let closed = false;
    try {
      expect(await tables(app)).toEqual(['idempotency_keys', 'idempotency_messages']);
      expect(app.get(TransactionHost)).toBeInstanceOf(TransactionHost);
      const [purge, recovery] = [app.get(IdempotencyPurgeService), app.get(IdempotencyRecovery)];
      expect([purge.scheduled, recovery.scheduled]).toEqual([true, true]);
      await app.close();
      closed = true;
      expect([purge.scheduled, recovery.scheduled]).toEqual([false, false]);
    } finally {
      if (!closed) await app.close();
    }
  });

  it("reuses the app's own nestjs-cls with or without the transactional plugin, and its own scheduler", async () => {
    for (const cls of [ClsModule.forRoot({ global: true, middleware: { mount: true } }), transactionalClsModule()]) {
      const moduleRef = await boot([cls, ScheduleModule.forRoot(), IdempotencyModule.forRoot({})]);
      const app = moduleRef.createNestApplication({ logger: false });
      await app.init();
      try {
        expect(app.get(IdempotencyPurgeService).scheduled).toBe(true);
        // The app's scheduler holds only the app's jobs.
        expect(app.get(SchedulerRegistry).getCronJobs().size).toBe(0);
        // Every TransactionHost reads the same transaction: the module's Outbox writes in the app's, and rolls back with it.
        const dataSource = app.get(DataSource);
        const host = app.get(TransactionHost) as TransactionHost<TransactionalAdapterTypeOrm>;
        const joined = `SELECT count(*)::int AS n FROM idempotency_outbox WHERE topic = 'joined'`;
        const rollBack = new Error('the app rolls its transaction back');
        await expect(
          host.withTransaction(async () => {
            expect(host.tx.queryRunner).toBeDefined();
            await app.get(Outbox).add({ topic: 'joined', payload: {} });
            expect(await host.tx.query(joined)).toEqual([{ n: 1 }]);
            throw rollBack;
          }),
        ).rejects.toBe(rollBack);
        expect(await dataSource.query(joined)).toEqual([{ n: 0 }]);
        expect(host.tx).toBe(dataSource.manager);
      } finally {
        await app.close();
      }
    }
  });

  it("stops the startup when the app's own transactional plugin is on another data source", async () => {
    const other = TypeOrmModule.forRoot({ name: 'other', type: 'postgres', url: db.url });
    const moduleRef = await boot([other, transactionalClsModule({ dataSourceName: 'other' }), IdempotencyModule.forRoot({ purge: { enabled: false }, recovery: { enabled: false } })]);
    const app = moduleRef.createNestApplication({ logger: false });
    try {
      await expect(app.init()).rejects.toThrow("IdempotencyModule: a TransactionHost of the app (nestjs-cls transactional plugin) is on another data source than the module's");
    } finally {
      await app.close();
    }
  });

  it('runs its migrations once when instances boot together, and not at all with migrations: false', async () => {
    const own = await createDatabase();
    const jobsOff = { purge: { enabled: false }, recovery: { enabled: false } };
    try {
      const off = await (await boot([IdempotencyModule.forRoot({ migrations: false, ...jobsOff })], own.url)).createNestApplication({ logger: false }).init();
      try {
        expect(await tables(off)).toEqual([null, null]);
      } finally {
        await off.close();
      }
      const instances = await Promise.all([1, 2, 3].map(() => boot([IdempotencyModule.forRoot(jobsOff)], own.url)));
      const apps = await Promise.all(instances.map((m) => m.createNestApplication({ logger: false }).init()));
      try {
        expect(await tables(apps[0])).toEqual(['idempotency_keys', 'idempotency_messages']);
        const applied = await apps[0].get(DataSource).query<{ name: string }[]>('SELECT name FROM migrations ORDER BY id');
        expect(applied.map((m) => m.name)).toEqual(idempotencyMigrations().map((m) => new m().name));
      } finally {
        await Promise.all(apps.map((a) => a.close()));
      }
    } finally {
      await own.drop();
    }
  });

  it("stops the startup when a route's replay provider is not one of the app's, or the route is phased, in one line saying why", async () => {
    class UnlistedReplays {
      store(answer: unknown) {
        return answer;
      }
      replay(stored: unknown) {
        return Promise.resolve(stored);
      }
    }
    @Controller('guard')
    class ReplayController {
      @Post('unlisted')
      @Idempotent({ replay: UnlistedReplays })
      unlisted() {
        return {};
      }
    }
    @Controller('guard')
    class PhasedReplayController {
      @Post('phased')
      @Idempotent({ replay: UnlistedReplays, phased: 'guard.phased' })
      phased() {
        return {};
      }
    }
    @Module({ controllers: [ReplayController] })
    class UnlistedModule {}
    @Module({ controllers: [PhasedReplayController], providers: [UnlistedReplays] })
    class PhasedModule {}
    const jobsOff = { purge: { enabled: false }, recovery: { enabled: false } };
    for (const [module, reason] of [
      [UnlistedModule, '@Idempotent() on ReplayController.unlisted: its `replay`, UnlistedReplays, is not a provider of the app: add it to the providers of a module'],
      [PhasedModule, '@Idempotent() on PhasedReplayController.phased: `replay` is not for phased routes (their last phase stores the answer)'],
    ] as const) {
      const app = (await boot([IdempotencyModule.forRoot(jobsOff), module])).createNestApplication({ logger: false });
      try {
        await expect(app.init()).rejects.toThrow(reason);
      } finally {
        await app.close();
      }
    }
  });

  const withRedis = hasRedis() ? it : it.skip;
  withRedis('runs a store it is given with its own lifecycle: connected at startup, closed at shutdown; an app client left open', async () => {
    const jobsOff = { purge: { enabled: false }, recovery: { enabled: false } };
    const start = async (redis: RedisIdempotencyStore) => (await boot([IdempotencyModule.forRoot({ stores: { redis }, ...jobsOff })])).createNestApplication({ logger: false });
    const key = randomUUID();
    const claim = { scope: 'given', key, id: keyId('given', key), fingerprint: Buffer.alloc(16), leaseMs: 1_000, retentionMs: 60_000 };

    const given = new RedisIdempotencyStore({ url: redisUrl(), keyPrefix: `given-${randomUUID()}:` });
    const app = await (await start(given)).init();
    try {
      expect(idempotencyStoreOf(app, 'redis').store).toBe(given);
      expect((await given.claim(claim)).kind).toBe('claimed');
    } finally {
      await app.close();
    }
    await expect(given.claim(claim)).rejects.toThrow('the Redis store is not connected');

    const own = new Redis(redisUrl());
    try {
      const withClient = await (await start(new RedisIdempotencyStore({ client: own, keyPrefix: `given-${randomUUID()}:` }))).init();
      await withClient.close();
      expect(await own.ping()).toBe('PONG');
    } finally {
      own.disconnect();
    }

    const unreachable = await start(new RedisIdempotencyStore({ url: 'redis://127.0.0.1:1' }));
    try {
      await expect(unreachable.init()).rejects.toThrow('IdempotencyModule: cannot connect to Redis (127.0.0.1:1)');
    } finally {
      await unreachable.close();
    }
  });

  it('resolves forRootAsync options with the same checks', async () => {
    const module = IdempotencyModule.forRootAsync({ useFactory: async () => ({ lease: '1m', retention: '30s' }) });
    await expect(refused([module])).rejects.toThrow('IdempotencyModule: the lease (1m) must be shorter than the retention (30s)');
  });
});
