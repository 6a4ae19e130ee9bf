import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { Registry } from 'prom-client';
import request from 'supertest';
import { IdempotencyModuleOptions } from 'safe-retries';
import { DemoModule } from '../support/demo/widgets.module';
import { LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from '../support/library-app';
import { PGBOUNCER_MISSING, PgBouncer, pgbouncerBinary, startPgBouncer } from '../support/pgbouncer';
import { histogram, timed } from '../support/race';
import { lockTableWrites } from '../support/table-lock';
import { TestDatabase, countRows, createDatabase } from '../support/test-services';
import { waitFor } from '../support/wait-for';

/**
 * `@Idempotent({ wait })` behind a real PgBouncer in transaction mode (a pool
 * of 8 server connections), with unnamed statements: without `listenUrl` a
 * waiting duplicate asks again (polling), never LISTENing through the pooler;
 * with it, waiters are woken by LISTEN/NOTIFY on that direct connection alone.
 */
jest.setTimeout(120_000);

const POOL_SIZE = 8;

describe('@Idempotent({ wait }) behind PgBouncer in transaction mode (e2e)', () => {
  let bouncer: PgBouncer;
  let db: TestDatabase;
  /** A direct session to the database (never through PgBouncer). */
  let pg: Client;

  beforeAll(async () => {
    if (!pgbouncerBinary()) throw new Error(PGBOUNCER_MISSING);
    bouncer = await startPgBouncer({ serverUrl: process.env.TEST_ADMIN_DATABASE_URL!, poolSize: POOL_SIZE });
  });
  afterAll(() => bouncer?.stop());
  beforeEach(async () => {
    db = await createDatabase();
    pg = new Client({ connectionString: db.url });
    await pg.connect();
  });
  afterEach(async () => {
    await pg?.end().catch(() => undefined);
    await db?.drop();
  });

  /** The demo on a database reached through PgBouncer, with unnamed statements; `pipeline`: on clients that pipeline. */
  const pooledApp = (registry: Registry, postgres: IdempotencyModuleOptions['postgres'] = {}, pipeline = false) =>
    createLibraryApp('fastify', {
      imports: [DemoModule],
      listen: true,
      pipeline,
      database: db,
      databaseUrl: () => bouncer.url(db.name),
      idempotency: { postgres: { transactionPooler: true, preparedStatements: false, ...postgres }, registry },
    });

  /** Sessions LISTENing for settled keys on this database (the store's listener names itself). */
  async function listeners(): Promise<number> {
    const { rows } = await pg.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'safe-retries-waits'`,
    );
    return rows[0].n;
  }

  /**
   * 100 identical requests to the demo's waiting route while the owner is held
   * by a lock on its table: 1 created, 99 replays, one row.
   */
  async function pileUp(t: LibraryApp, registry: Registry): Promise<void> {
    const key = randomUUID();
    const name = `wait-${key}`;
    const claims = async () => {
      const { values } = await registry.getSingleMetric('idempotency_claim_duration_seconds')!.get();
      return values.find((v) => (v as { metricName?: string }).metricName === 'idempotency_claim_duration_seconds_count')?.value ?? 0;
    };
    const post = () => request(t.url!).post('/demo/waiting').set(PRINCIPAL_HEADER, 'client-a').set('Idempotency-Key', key).send({ name });
    const lock = await lockTableWrites(db.url, 'demo_widgets');
    let answers: ReturnType<typeof timed>[];
    try {
      const before = await claims();
      answers = Array.from({ length: 100 }, () => timed(post()));
      await waitFor('the 99 duplicates to wait for the owner', async () => (await claims()) >= before + 1 + 2 * 99, { timeoutMs: 30_000 });
    } finally {
      await lock.release();
    }
    const answered = await Promise.all(answers);
    console.log(`pgbouncer wait pile-up: ${JSON.stringify(histogram(answered))}`);
    expect(histogram(answered)).toEqual({ '201': 1, '201 replay': 99 });
    expect(await countRows(t.dataSource, 'demo_widgets', 'name = $1', [name])).toBe(1);
  }

  it('wait mode without a listener: a pile-up of 99 duplicates answered with 99 replays, by polling', async () => {
    const registry = new Registry();
    const t = await pooledApp(registry);
    try {
      await pileUp(t, registry);
      expect(await listeners()).toBe(0);
    } finally {
      await t.close();
    }
  });

  it("on clients that pipeline (a key's last write sent with COMMIT): the same pile-up, 99 replays, one row", async () => {
    const registry = new Registry();
    const t = await pooledApp(registry, {}, true);
    try {
      await pileUp(t, registry);
    } finally {
      await t.close();
    }
  });

  it('with listenUrl: a pile-up of 99 duplicates is woken by LISTEN/NOTIFY: one listener, on the direct connection', async () => {
    const registry = new Registry();
    const t = await pooledApp(registry, { listenUrl: db.url });
    try {
      await pileUp(t, registry);
      expect(await listeners()).toBe(1);
      expect(await bouncer.clientNames(db.name)).not.toContain('safe-retries-waits');
    } finally {
      await t.close();
    }
  });
});
