import { randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { DevPostgres, startPostgres } from '@safe-retries/dev-postgres';
import { Client } from 'pg';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IdempotencyModule, transactionalClsModule } from 'safe-retries';
import { IDEMPOTENCY_POSTGRES_STORE, idempotencyStoreOf } from 'safe-retries/testing';
import { TestApp, TestAppOptions, countRows, createTestApp } from '../support/app';
import { Ledger } from '../support/card-network';
import { paymentBody } from '../support/fixtures';
import { waitFor } from '../support/http-client';
import { histogram, timed } from '../../packages/idempotency/test/support/race';
import { ReplicaReadIdempotencyStore } from '../support/replica-read-idempotency.store';
import { MetricsService } from '../../src/metrics/metrics.service';

/**
 * The app on a primary and a real streaming replica that applies each commit
 * 2 s late (recovery_min_apply_delay), with DATABASE_REPLICA_URLS set: the
 * listings read from the replica, keys only ever from the primary. A retry
 * right after a 201 is therefore the replay, never a second charge, while the
 * listing visibly lags. The control runs the same retry with a store that
 * looks keys up on the replica, and it charges twice: the lag is real and the
 * suite would catch the wiring that Airbnb's payments once had.
 *
 * The replay cache is off: the retry is answered by the claim in the database,
 * as on an instance that did not serve the first request.
 *
 * A replica that fails a read is a slower listing, never a 500: one that has
 * not replayed the migrations of a fresh database yet (its replay paused, the
 * app booted on the primary) and one that is stopped each have the listing
 * answered from the primary, counted in database_replica_fallbacks_total and
 * logged once per replica and minute.
 */
const APPLY_DELAY_MS = 2_000;

describe('read replicas: keys from the primary, listings from a lagging replica (e2e)', () => {
  jest.setTimeout(180_000);
  let cluster: DevPostgres;

  beforeAll(async () => {
    cluster = await startPostgres({ replica: { applyDelay: `${APPLY_DELAY_MS}ms` } });
  });
  afterAll(() => cluster?.destroy());

  /** On the replica: `sql`, as the superuser (pausing and resuming its replay). */
  async function onReplica<T>(sql: string, values: unknown[] = []): Promise<T[]> {
    const client = new Client({ connectionString: cluster.replica!.url('postgres') });
    await client.connect();
    try {
      return (await client.query(sql, values)).rows as T[];
    } finally {
      await client.end();
    }
  }

  /** A test app on a new database of the cluster; `beforeBoot` runs once the empty database has reached the replica. */
  async function boot(overrides: TestAppOptions['overrides'] = [], beforeBoot?: () => Promise<void>): Promise<TestApp> {
    const name = `replicas_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
    const url = await cluster.createDatabase(name);
    await cluster.replica!.caughtUp();
    await beforeBoot?.();
    const t = await createTestApp({
      listen: true,
      database: { url, name, drop: async () => undefined },
      env: {
        DATABASE_URL: url,
        DATABASE_REPLICA_URLS: cluster.replica!.url(name),
        DATABASE_POOL_SIZE: '20',
        IDEMPOTENCY_REPLAY_CACHE: '0',
        CARD_NETWORK_DELAY: '50ms',
      },
      overrides,
    });
    if (!beforeBoot) await cluster.replica!.caughtUp();
    return t;
  }

  /** database_replica_fallbacks_total of `reason`. */
  async function fallbacks(t: TestApp, reason: string): Promise<number> {
    const { values } = await t.app.get(MetricsService).registry.getSingleMetric('database_replica_fallbacks_total')!.get();
    return values.filter((v) => v.labels.reason === reason).reduce((n, v) => n + v.value, 0);
  }

  /** A payment, then at once the same request again, the payment by id and the listing. */
  async function retryRightAfter201(t: TestApp) {
    const key = randomUUID();
    const description = `replica ${key}`;
    const body = paymentBody({ amount: 4321, description });
    const post = () => request(t.url!).post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body);
    const first = await post().expect(201);
    const created = Date.now();
    const retry = await post();
    const byId = await request(t.url!).get(`/payments/${first.body.id}`).set(t.auth());
    const listing = await request(t.url!).get('/payments?limit=100').set(t.auth()).expect(200);
    const listedAtFirst = (listing.body.data as { id: string }[]).some((p) => p.id === first.body.id);
    const probesDoneMs = Date.now() - created;
    return { key, description, first, retry, byId, listedAtFirst, created, probesDoneMs };
  }

  describe('keys read from the primary (the app as configured)', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await boot();
    });
    afterAll(() => t?.close());

    it('the replica really is a hot standby of the primary: read-only, behind by the apply delay', async () => {
      const [{ recovery }] = await t.dataSource.query<{ recovery: boolean }[]>('SELECT pg_is_in_recovery() AS recovery');
      expect(recovery).toBe(false); // the data source's default mode is the primary
      const [row] = await onReplica(`SELECT pg_is_in_recovery() AS recovery, current_setting('recovery_min_apply_delay') AS delay`);
      expect(row).toEqual({ recovery: true, delay: '2s' });
    });

    // The library's own sessions, for an app that gives TypeORM `replication` options (this
    // app routes its replica reads itself, so its data source has none): the module alone on
    // such a data source, its claim pool, its waiters' listener and its relay's each in use.
    it("the library's claim pool and sessions, given TypeORM's replication options, connect to the master, never a slave", async () => {
      const name = `replicas_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
      const url = await cluster.createDatabase(name);
      await cluster.replica!.caughtUp();
      const moduleRef = await Test.createTestingModule({
        imports: [
          TypeOrmModule.forRoot({ type: 'postgres', replication: { master: { url }, slaves: [{ url: cluster.replica!.url(name) }] } }),
          transactionalClsModule({ middleware: false }),
          IdempotencyModule.forRoot({ purge: { enabled: false }, recovery: { enabled: false }, outbox: { publish: async () => undefined } }),
        ],
      }).compile();
      await moduleRef.init();
      try {
        const { store, inContext } = idempotencyStoreOf(moduleRef);
        const at = { scope: 'replicas', key: randomUUID(), id: randomUUID() };
        // A waiter LISTENs on a session of the store's; the key's settlement is announced on its claim pool.
        const waiter = store.settlement!.awaitSettled(at, 5_000);
        await inContext(() => store.settlement!.announceSettled(at));
        await waiter.settled;
        const sessions = (rows: { application_name: string }[]) => rows.map((r) => r.application_name);
        const query = "SELECT DISTINCT application_name FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'safe-retries-%' ORDER BY 1";
        // Every session seen on the primary (an idle claim connection may have ended by the next look).
        const onPrimary = new Set<string>();
        await waitFor(
          "the library's sessions on the primary",
          async () => {
            for (const session of sessions(await moduleRef.get(DataSource).query(query, [name]))) onPrimary.add(session);
            return onPrimary.size === 3;
          },
          { timeoutMs: 10_000, seen: () => [...onPrimary] },
        );
        expect([...onPrimary].sort()).toEqual(['safe-retries-claims', 'safe-retries-outbox', 'safe-retries-waits']);
        expect(sessions(await onReplica(query, [name]))).toEqual([]);
      } finally {
        await moduleRef.close();
      }
    });

    it('100 identical payments at once: one charge at the card network, one payment', async () => {
      const key = randomUUID();
      const description = `replica race ${key}`;
      const body = paymentBody({ amount: 777, description });
      const responses = await Promise.all(
        Array.from({ length: 100 }, () => timed(request(t.url!).post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body))),
      );
      console.log(`replicas: 100 identical payments: ${JSON.stringify(histogram(responses))}`);
      expect(await countRows(t.dataSource, 'payments', 'description = $1', [description])).toBe(1);
      expect(await Ledger.of(t).chargesDescribed(description)).toHaveLength(1);
      const originals = responses.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined);
      expect(originals).toHaveLength(1);
      for (const r of responses) expect([201, 409]).toContain(r.status);
    });

    it('a retry right after the 201 is the replay; GET by id answers 200; the listing lags, then catches up', async () => {
      const { first, retry, byId, listedAtFirst, created, probesDoneMs, description } = await retryRightAfter201(t);

      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.body.id).toBe(first.body.id);
      expect(byId.status).toBe(200);
      expect(byId.body.id).toBe(first.body.id);
      // The proof that the listing reads a replica that really lags, and (the listing was
      // read after them) that the retry and the GET ran while it lagged.
      expect(listedAtFirst).toBe(false);

      let listed: string[] = [];
      await waitFor(
        'the listing to show the payment',
        async () => {
          const res = await request(t.url!).get('/payments?limit=100').set(t.auth()).expect(200);
          listed = (res.body.data as { id: string }[]).map((p) => p.id);
          return listed.includes(first.body.id);
        },
        { seen: () => ({ payment: first.body.id, listed }) },
      );
      const caughtUpMs = Date.now() - created;
      console.log(`replicas: the listing showed the payment ${caughtUpMs} ms after its 201 (apply delay ${APPLY_DELAY_MS} ms; retry, GET by id and first listing done at ${probesDoneMs} ms)`);
      expect(caughtUpMs).toBeGreaterThanOrEqual(APPLY_DELAY_MS / 2);

      expect(await Ledger.of(t).chargesDescribed(description)).toHaveLength(1);
      expect(await countRows(t.dataSource, 'payments', 'description = $1', [description])).toBe(1);
    });

    it('a listing page after a cursor the replica has not received yet is read from the primary', async () => {
      const pay = () => request(t.url!).post('/payments').set(t.auth()).set('Idempotency-Key', randomUUID()).send(paymentBody());
      const older = await pay().expect(201);
      await cluster.replica!.caughtUp();
      const cursor = await pay().expect(201);
      const page = await request(t.url!).get(`/payments?limit=100&starting_after=${cursor.body.id}`).set(t.auth()).expect(200);
      expect((page.body.data as { id: string }[]).map((p) => p.id)).toContain(older.body.id);
    });
  });

  describe('a replica that fails a read: the listing is answered from the primary', () => {
    let warn: jest.SpyInstance;
    beforeEach(() => {
      warn = jest.spyOn(Logger.prototype, 'warn');
    });
    afterEach(() => warn.mockRestore());
    const replicaLines = () => warn.mock.calls.map(([message]) => String(message)).filter((m) => m.startsWith('read replica '));

    it('behind the migrations of a fresh database: 200 at once, counted, logged once', async () => {
      // The replica has the empty database and stops replaying there: the app's migrations never reach it.
      const t = await boot([], async () => {
        await onReplica('SELECT pg_wal_replay_pause()');
      });
      try {
        const [{ present }] = await onReplica<{ present: number }>(`SELECT count(*)::int AS present FROM pg_database WHERE datname = '${t.db.name}'`);
        expect(present).toBe(1);
        const paid = await request(t.url!).post('/payments').set(t.auth()).set('Idempotency-Key', randomUUID()).send(paymentBody()).expect(201);
        for (let i = 0; i < 5; i++) {
          const listing = await request(t.url!).get('/payments?limit=10').set(t.auth());
          expect(listing.status).toBe(200);
          expect((listing.body.data as { id: string }[]).map((p) => p.id)).toEqual([paid.body.id]);
        }
        const orders = await request(t.url!).get('/orders').set(t.auth());
        expect(orders.status).toBe(200);
        expect(await fallbacks(t, 'behind')).toBe(6);
        const lines = replicaLines();
        console.log(`replicas: behind the migrations: 6 listings answered by the primary; logged: ${JSON.stringify(lines)}`);
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(/^read replica 1 of 1 \(127\.0\.0\.1:\d+\/replicas_\w+\) failed a read \(behind: relation "payments" does not exist\): answered from the primary$/);
      } finally {
        await onReplica('SELECT pg_wal_replay_resume()');
        await t.close();
      }
      await cluster.replica!.caughtUp();
    });

    it('stopped: 200 from the primary, counted, logged once; started again, the replica serves the listings again', async () => {
      const t = await boot();
      try {
        const paid = await request(t.url!).post('/payments').set(t.auth()).set('Idempotency-Key', randomUUID()).send(paymentBody()).expect(201);
        await cluster.replica!.caughtUp();
        // The replica's pool holds a connection from a listing before the stop.
        await request(t.url!).get('/payments').set(t.auth()).expect(200);
        expect(await fallbacks(t, 'unavailable')).toBe(0);
        await cluster.replica!.stop();
        try {
          for (let i = 0; i < 5; i++) {
            const listing = await request(t.url!).get('/payments?limit=10').set(t.auth());
            expect(listing.status).toBe(200);
            expect((listing.body.data as { id: string }[]).map((p) => p.id)).toEqual([paid.body.id]);
          }
          expect(await fallbacks(t, 'unavailable')).toBe(5);
          const lines = replicaLines();
          console.log(`replicas: stopped: 5 listings answered by the primary; logged: ${JSON.stringify(lines)}`);
          expect(lines).toHaveLength(1);
          expect(lines[0]).toMatch(/^read replica 1 of 1 \(127\.0\.0\.1:\d+\/replicas_\w+\) failed a read \(unavailable: .+\): answered from the primary$/);
        } finally {
          await cluster.replica!.start();
        }
        await cluster.replica!.caughtUp();
        await request(t.url!).get('/payments').set(t.auth()).expect(200);
        expect(await fallbacks(t, 'unavailable')).toBe(5);
      } finally {
        await t.close();
      }
    });
  });

  describe('control: keys read from the replica (the wiring this must never have)', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await boot([{ provide: IDEMPOTENCY_POSTGRES_STORE, useClass: ReplicaReadIdempotencyStore }]);
    });
    afterAll(() => t?.close());

    it('a retry right after the 201 runs the payment again: two charges for one key', async () => {
      const { first, retry, description, listedAtFirst } = await retryRightAfter201(t);
      expect(listedAtFirst).toBe(false);
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBeUndefined();
      expect(retry.body.id).not.toBe(first.body.id);
      const charges = (await Ledger.of(t).chargesDescribed(description)).length;
      console.log(`replicas control (keys read from the replica): one key, ${charges} charges`);
      expect(charges).toBe(2);
      expect(await countRows(t.dataSource, 'payments', 'description = $1', [description])).toBe(2);
    });
  });
});
