import { randomUUID } from 'node:crypto';
import { ModuleMetadata } from '@nestjs/common';
import { SchedulerRegistry, ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ClsModule } from 'nestjs-cls';
import request from 'supertest';
import { IdempotencyModule, IdempotencyPurgeService, transactionalClsModule } from 'safe-retries';
import { PURGE_JOB_NAME } from '../../packages/idempotency/src/idempotency-purge.service';
import { RECOVERY_JOB_NAME } from '../../packages/idempotency/src/idempotency-recovery.service';
import { keyId } from '../../packages/idempotency/src/key-id';
import { LIBRARY_TABLE, LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from '../support/demo/library-app';
import { countRows } from '../support/app';
import { TestDatabase, createTestDatabase } from '../support/database';
import { waitFor } from '../support/http-client';
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
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  const compile = (imports: ModuleMetadata['imports'], connect: boolean) =>
    Test.createTestingModule({
      imports: [TypeOrmModule.forRoot({ type: 'postgres', url: db.url, manualInitialization: !connect }), ...(imports ?? [])],
    }).compile();
  const boot = (imports: ModuleMetadata['imports']) => compile(imports, true);
  // A boot that is meant to fail: its data source is never connected, so nothing
  // of it (a pool, TypeORM's connection retries) outlives the rejected compile.
  const refused = (imports: ModuleMetadata['imports']) => compile(imports, false);

  it('says in one error what is missing without nestjs-cls and its transactional plugin', async () => {
    await expect(refused([IdempotencyModule.forRoot({})])).rejects.toThrow(
      'IdempotencyModule needs nestjs-cls with ClsPluginTransactional(TypeORM adapter)',
    );
    await expect(refused([ClsModule.forRoot({ global: true }), IdempotencyModule.forRoot({})])).rejects.toThrow(
      'IdempotencyModule needs nestjs-cls with ClsPluginTransactional(TypeORM adapter)',
    );
  });

  it("says in one error that the app must import ScheduleModule.forRoot() while a job is enabled", async () => {
    const both = refused([transactionalClsModule(), IdempotencyModule.forRoot({})]);
    await expect(both).rejects.toThrow(
      "IdempotencyModule schedules its purge and recovery through @nestjs/schedule, and the app has not registered it: import ScheduleModule.forRoot() from '@nestjs/schedule' in the app's root module, or set purge: { enabled: false } and recovery: { enabled: false } in the IdempotencyModule options",
    );
    const recoveryOnly = refused([transactionalClsModule(), IdempotencyModule.forRoot({ purge: { enabled: false } })]);
    await expect(recoveryOnly).rejects.toThrow('IdempotencyModule schedules its recovery through @nestjs/schedule');
  });

  it("adds its purge and recovery jobs to the app's SchedulerRegistry, which stops them on shutdown", async () => {
    const moduleRef = await boot([ScheduleModule.forRoot(), transactionalClsModule(), IdempotencyModule.forRoot({})]);
    const app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    const registry = app.get(SchedulerRegistry);
    let closed = false;
    try {
      expect(registry.getIntervals()).toEqual([RECOVERY_JOB_NAME]);
      expect([...registry.getCronJobs().keys()]).toEqual([PURGE_JOB_NAME]);
      const purge = registry.getCronJob(PURGE_JOB_NAME);
      expect(purge.isActive).toBe(true);
      await app.close();
      closed = true;
      expect(purge.isActive).toBe(false);
      expect(registry.getIntervals()).toEqual([]);
      expect(registry.getCronJobs().size).toBe(0);
    } finally {
      if (!closed) await app.close();
    }
  });

  it('starts without ScheduleModule when its jobs are off', async () => {
    const moduleRef = await boot([transactionalClsModule(), IdempotencyModule.forRoot({ purge: { enabled: false }, recovery: { enabled: false } })]);
    const app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    try {
      // The module brings no scheduler of its own.
      expect(() => app.get(SchedulerRegistry, { strict: false })).toThrow();
    } finally {
      await app.close();
    }
  });

  it('resolves forRootAsync options with the same checks', async () => {
    const module = IdempotencyModule.forRootAsync({ useFactory: async () => ({ lease: '1m', retention: '30s' }) });
    await expect(refused([transactionalClsModule(), module])).rejects.toThrow('IdempotencyModule: the lease (1m) must be shorter than the retention (30s)');
  });
});
