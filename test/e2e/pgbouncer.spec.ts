import { randomUUID } from 'node:crypto';
import { DevPostgres, startPostgres } from '@safe-retries/dev-postgres';
import { Client } from 'pg';
import request from 'supertest';
import { migrations } from '../../migrations';
import { TestApp, countRows, createTestApp } from '../support/app';
import { AppProcess, PROCESS_CLIENT, startAppProcesses, stopAll } from '../support/app-process';
import { CardNetworkProcess, startCardNetworkProcess } from '../support/card-network';
import { TestDatabase, adminUrl, createTestDatabase } from '../support/database';
import { NOW_US } from '../support/db-clock';
import { Ledger } from '../support/card-network';
import { paymentBody } from '../support/fixtures';
import { RawResponse, authHeaders, send, waitFor } from '../support/http-client';
import { keyIn, keyIs } from '../support/keys';
import { PGBOUNCER_MISSING, PgBouncer, pgbouncerBinary, startPgBouncer } from '../../packages/idempotency/test/support/pgbouncer';
import { PURGE_LOCK_ID } from '../../packages/idempotency/test/support/keys-table';
import { histogram, timed } from '../../packages/idempotency/test/support/race';
import { suitesNeeding } from '../support/tool-suites';

/**
 * The app behind a real PgBouncer (Debian's, 1.18) in transaction mode with a
 * pool of 8 server connections, in front of the run's PostgreSQL: each server
 * connection serves one transaction, then another client, so nothing may rely
 * on a session. Two app processes (up to 60 client connections between them)
 * share the 8.
 *
 * - With DATABASE_PREPARED_STATEMENTS=off and no direct URL, everything goes
 *   through PgBouncer: the boot and its migrations (a transaction-level lock),
 *   the race of 100 identical payments, phased payments on a slow network, the
 *   takeover of a SIGKILLed instance's payment, and the recovery job and the
 *   purge on both instances (a transaction-level lock). `wait` behind it, by
 *   polling or by LISTEN on a direct connection, is the library's own suite
 *   (packages/idempotency/test/e2e/idempotency-pgbouncer.spec.ts).
 * - With read replicas, the primary and a replica 2 s behind each behind a
 *   PgBouncer of its own: keys from the primary, listings from the replica.
 * - With DATABASE_DIRECT_URL alone (the pooler declared, statements not
 *   mentioned), two instances send unnamed statements: 100 payments, no 500.
 * - The control: the same fleet with prepared statements turned on fails as
 *   PgBouncer before 1.21 makes it fail (`prepared statement "..." already
 *   exists` or `does not exist`), so the setting is what makes the rest pass.
 */
jest.setTimeout(180_000);

const POOL_SIZE = 8;
const LEASE = '3s';

suitesNeeding('PgBouncer suite', pgbouncerBinary() !== undefined, PGBOUNCER_MISSING)('behind PgBouncer in transaction mode (e2e)', () => {
  let bouncer: PgBouncer;
  let network: CardNetworkProcess;
  /** A direct session to the database of the current group (never through PgBouncer). */
  let pg: Client;
  let db: TestDatabase;

  beforeAll(async () => {
    bouncer = await startPgBouncer({ serverUrl: adminUrl(), poolSize: POOL_SIZE });
    // Outlives the app processes: the ledger of every charge. 300 ms per call: a slow network.
    network = await startCardNetworkProcess({ delay: '300ms' });
    console.log(`PgBouncer ${bouncer.version}, transaction mode, default_pool_size ${POOL_SIZE}`);
  });
  afterAll(async () => {
    await network?.stop();
    await bouncer?.stop();
  });

  /** A fresh database, and a direct session to it. */
  async function freshDatabase(): Promise<void> {
    db = await createTestDatabase();
    pg = new Client({ connectionString: db.url });
    await pg.connect();
  }
  async function dropDatabase(): Promise<void> {
    await pg?.end().catch(() => undefined);
    await db?.drop();
  }

  /** The environment of an app process whose database is reached through PgBouncer. */
  const pooledEnv = (extra: Record<string, string> = {}): Record<string, string> => ({
    DATABASE_URL: bouncer.url(db.name),
    DATABASE_PREPARED_STATEMENTS: 'off',
    CARD_NETWORK_URL: network.url,
    CARD_NETWORK_TIMEOUT: '2s',
    CARD_NETWORK_MAX_RETRIES: '0',
    IDEMPOTENCY_LEASE: LEASE,
    IDEMPOTENCY_JOBS: 'off',
    LOG_LEVEL: 'warn',
    ...extra,
  });

  const pay = (app: AppProcess, key: string, body: object) =>
    send(app.url, { method: 'POST', path: '/payments', headers: authHeaders(PROCESS_CLIENT.key, key), body, timeoutMs: 60_000 });

  const label = (r: RawResponse) => (r.headers['idempotent-replayed'] === 'true' ? `${r.status} replay` : String(r.status));
  const counts = (responses: RawResponse[]) => {
    const h: Record<string, number> = {};
    for (const r of responses) h[label(r)] = (h[label(r)] ?? 0) + 1;
    return h;
  };

  /** Advisory locks held in this database by any session: a session-level lock left on a pooled server connection would show here. */
  const advisoryLocks = async () =>
    (
      await pg.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      )
    ).rows[0].n;

  describe('unnamed statements, no direct URL: everything through PgBouncer', () => {
    const apps: AppProcess[] = [];
    beforeAll(async () => {
      await freshDatabase();
      // Both at once on the empty database: both run the migrator, through PgBouncer.
      await startAppProcesses([{ env: pooledEnv() }, { env: pooledEnv() }], apps);
    });
    afterAll(async () => {
      await stopAll(apps);
      await dropDatabase();
    });

    it('two instances boot together on an empty database through it: each migration once, no lock left behind', async () => {
      for (const app of apps) {
        expect(app.output()).toContain('database mode: transaction pooler at DATABASE_URL (unnamed statements; no DATABASE_DIRECT_URL');
      }
      const { rows } = await pg.query<{ name: string; n: number }>('SELECT name, count(*)::int AS n FROM migrations GROUP BY name');
      expect(rows.map((r) => r.name).sort()).toEqual(migrations.map((m) => new m().name).sort());
      for (const row of rows) expect(row.n).toBe(1);
      expect(await advisoryLocks()).toBe(0);
      // What each instance holds on the server: no session through PgBouncer outlives a transaction.
      expect(await bouncer.clientNames(db.name)).not.toContain('safe-retries-waits');
      expect(await bouncer.clientNames(db.name)).not.toContain('safe-retries-outbox');
    });

    it('100 identical payments across both instances: one charge; more client connections than server connections', async () => {
      const key = randomUUID();
      const description = `pgbouncer race ${key}`;
      const body = { amount: 1234, currency: 'usd', source: 'tok_visa', description };
      const { result: responses, clients, servers } = await bouncer.peak(db.name, () =>
        Promise.all(Array.from({ length: 100 }, (_, i) => pay(apps[i % 2], key, body))),
      );
      console.log(`pgbouncer race: ${JSON.stringify(counts(responses))}; peak ${clients} client connections on ${servers} server connections`);
      expect(responses.filter((r) => r.status !== 201 && r.status !== 409).map((r) => `${r.status} ${r.text}`)).toEqual([]);
      const originals = responses.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined);
      expect(originals).toHaveLength(1);
      const paymentId = originals[0].json<{ id: string }>().id;
      for (const r of responses.filter((x) => x.status === 201)) expect(r.text).toBe(originals[0].text);
      expect((await pg.query('SELECT id FROM payments WHERE description = $1', [description])).rows).toEqual([{ id: paymentId }]);
      expect(await network.ledger.chargesDescribed(description)).toHaveLength(1);
      expect(servers).toBeLessThanOrEqual(POOL_SIZE);
      expect(clients).toBeGreaterThan(POOL_SIZE);
      // The outcome by key, asked on both instances, goes through PgBouncer too.
      for (const app of apps) {
        const outcome = await send(app.url, { path: `/idempotency-keys/${key}`, headers: authHeaders(PROCESS_CLIENT.key) });
        expect(outcome.json()).toMatchObject({ key, state: 'completed', status: 201 });
      }
    });

    it('phased payments on a slow network (two 300 ms calls each): 60 at once, each charged once, every one ending 201', async () => {
      const batch = randomUUID();
      /**
       * A client that retries with its key, as the bundled client does: on 8 server
       * connections a claim or a lease renewal may wait its turn long enough for a
       * retryable answer (503, or 409 when an owner could not renew its 3 s lease);
       * the retry with the same key resumes the same payment. A connection lost
       * before its answer (on a loaded machine, one can outlive the server's
       * connection timeout) is retried the same way, as status 0.
       */
      const payUntilDone = async (app: AppProcess, key: string, body: object) => {
        const answers: RawResponse[] = [];
        for (let attempt = 0; attempt < 30; attempt++) {
          const started = performance.now();
          const answer = await pay(app, key, body).catch((error: Error): RawResponse => {
            if (!/socket hang up|ECONNRESET/.test(String(error))) throw error;
            const ended = performance.now();
            return { status: 0, headers: {}, text: String(error), ms: ended - started, started, ended, json: () => { throw error; } };
          });
          answers.push(answer);
          if (answer.status !== 0 && answer.status !== 409 && answer.status !== 503) break;
          await new Promise((r) => setTimeout(r, 1000 * Number(answer.headers['retry-after'] ?? 1)));
        }
        return answers;
      };
      const { result: tries, clients, servers } = await bouncer.peak(db.name, () =>
        Promise.all(
          Array.from({ length: 60 }, (_, i) =>
            payUntilDone(apps[i % 2], randomUUID(), { amount: 500 + i, currency: 'usd', source: 'tok_visa', description: `slow ${batch} ${i}` }),
          ),
        ),
      );
      const first = tries.map((t) => t[0]);
      const last = tries.map((t) => t[t.length - 1]);
      const slowest = Math.max(...first.map((r) => r.ms));
      console.log(
        `pgbouncer slow network: first answers ${JSON.stringify(counts(first))}, last ${JSON.stringify(counts(last))}, slowest ${Math.round(slowest)} ms; peak ${clients} clients on ${servers} servers`,
      );
      expect(last.map((r) => r.status)).toEqual(Array.from({ length: 60 }, () => 201));
      const charged = (await network.ledger.intents()).filter((i) => i.status === 'succeeded' && i.description?.startsWith(`slow ${batch} `));
      expect(charged).toHaveLength(60);
      expect(new Set(charged.map((c) => c.description)).size).toBe(60);
      const rows = await pg.query<{ n: number }>(`SELECT count(*)::int AS n FROM payments WHERE description LIKE $1`, [`slow ${batch} %`]);
      expect(rows.rows[0].n).toBe(60);
      expect(servers).toBeLessThanOrEqual(POOL_SIZE);
    });

    it('an instance SIGKILLed mid-payment: 409 inside the lease, then the other instance takes over and charges once', async () => {
      const [victim, standby] = apps;
      const key = randomUUID();
      const description = `pgbouncer crash ${key}`;
      const body = { amount: 777, currency: 'eur', source: 'tok_visa', description };
      // The network takes the call and sits on it: the Start phase has committed, the charge is asked for.
      await network.ledger.hold();
      let lost: Promise<unknown>;
      try {
        lost = pay(victim, key, body).catch((error: Error) => error);
        await waitFor('the Start phase to commit', async () => (await pg.query('SELECT 1 FROM payments WHERE description = $1', [description])).rowCount === 1);
        await waitFor('the card network to hold the call', async () => (await network.ledger.held()) > 0);
        victim.kill('SIGKILL');
        expect(await victim.exited).toBeNull();
      } finally {
        await network.ledger.release();
      }
      expect(String(await lost)).toMatch(/socket hang up|ECONNRESET/);

      const early = await pay(standby, key, body);
      expect(early.status).toBe(409);
      expect(early.json()).toMatchObject({ code: 'idempotency_request_in_progress' });
      await waitFor(
        'the dead owner lease to expire',
        async () => (await pg.query(`SELECT 1 FROM idempotency_keys WHERE ${keyIs()} AND lease <= ${NOW_US}`, [key])).rowCount === 1,
        { timeoutMs: 20_000, intervalMs: 100 },
      );
      const taken = await pay(standby, key, body);
      expect(taken.status).toBe(201);
      expect(taken.headers['idempotent-replayed']).toBeUndefined();
      const replay = await pay(standby, key, body);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(taken.text);
      const { rows } = await pg.query<{ id: string; status: string }>('SELECT id, status FROM payments WHERE description = $1', [description]);
      expect(rows).toEqual([{ id: taken.json<{ id: string }>().id, status: 'succeeded' }]);
      expect(await network.ledger.chargesDescribed(description)).toHaveLength(1);
    });

    it('the recovery job and the purge on two new instances: abandoned payments finished once, expired keys purged, one purger at a time', async () => {
      await stopAll(apps);
      const env = pooledEnv({
        // Recovery every two leases (6 s); the purge every second (144 runs a retention, at least every second).
        IDEMPOTENCY_JOBS: 'on',
        IDEMPOTENCY_RETENTION: '4s',
        CARD_NETWORK_TIMEOUT: '1s',
        // The jobs' own lines (scheduled, recovered) are at info.
        LOG_LEVEL: 'info',
      });
      const fleet = await startAppProcesses([{ env }, { env }], apps);
      for (const app of fleet) {
        expect(app.output()).toContain('purge of expired idempotency keys scheduled (* * * * * *)');
        expect(app.output()).toContain('recovery of abandoned phased operations every 6000 ms');
      }

      // Abandoned: the confirmation is charged but never answered; each request gives up (503).
      const batch = randomUUID();
      const keys = Array.from({ length: 6 }, () => randomUUID());
      await network.ledger.fault('hang', keys.length);
      const gaveUp = await Promise.all(
        keys.map((key, i) => pay(fleet[i % 2], key, { amount: 300 + i, currency: 'usd', source: 'tok_visa', description: `abandoned ${batch} ${i}` })),
      );
      expect(counts(gaveUp)).toEqual({ '503': keys.length });

      // Nobody retries: the recovery jobs of both instances finish each one after its lease.
      await waitFor(
        'the recovery jobs to finish every abandoned payment',
        async () => (await pg.query(`SELECT 1 FROM payments WHERE description LIKE $1 AND status = 'succeeded'`, [`abandoned ${batch} %`])).rowCount === keys.length,
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      const charged = (await network.ledger.intents()).filter((i) => i.status === 'succeeded' && i.description?.startsWith(`abandoned ${batch} `));
      expect(charged).toHaveLength(keys.length);
      const recovered = fleet.map((app) => [...app.output().matchAll(/"recovery: \{\\"taken\\":(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0));
      console.log(`pgbouncer recovery: taken over by instance 1: ${recovered[0]}, by instance 2: ${recovered[1]}`);
      expect(recovered[0] + recovered[1]).toBeGreaterThanOrEqual(keys.length);

      // Another session holds the purge lock: both instances skip, the keys outlive their retention.
      const holder = new Client({ connectionString: db.url });
      await holder.connect();
      try {
        await holder.query('SELECT pg_advisory_lock($1)', [PURGE_LOCK_ID]);
        await waitFor(
          'every key to pass its retention',
          async () => (await pg.query(`SELECT 1 FROM idempotency_keys WHERE ${keyIn()} AND expires_at <= now() - interval '2 seconds'`, [keys])).rowCount === keys.length,
          { timeoutMs: 30_000, intervalMs: 200 },
        );
        expect(await countKeys(keys)).toBe(keys.length);
        await holder.query('SELECT pg_advisory_unlock($1)', [PURGE_LOCK_ID]);
      } finally {
        await holder.end();
      }
      // Free again: the next tick of either instance purges them.
      await waitFor('the purge to delete the expired keys', async () => (await countKeys(keys)) === 0, { timeoutMs: 15_000, intervalMs: 100 });
      for (const app of fleet) {
        expect(app.hasExited()).toBe(false);
        expect(app.output()).not.toMatch(/purge of expired idempotency keys failed|recovery run failed/);
      }
      await stopAll(fleet);
      expect(await advisoryLocks()).toBe(0);
    });

    const countKeys = async (keys: string[]) => (await pg.query(`SELECT 1 FROM idempotency_keys WHERE ${keyIn()}`, [keys])).rowCount ?? 0;
  });

  describe('read replicas beside it: the primary and a lagging replica, each behind a PgBouncer of its own', () => {
    const APPLY_DELAY_MS = 2_000;
    let cluster: DevPostgres;
    let primary: PgBouncer;
    let replica: PgBouncer;
    let t: TestApp;
    beforeAll(async () => {
      cluster = await startPostgres({ replica: { applyDelay: `${APPLY_DELAY_MS}ms` } });
      primary = await startPgBouncer({ serverUrl: cluster.url(), poolSize: POOL_SIZE });
      replica = await startPgBouncer({ serverUrl: cluster.replica!.url(), poolSize: POOL_SIZE });
      const name = `pooled_replicas_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
      await cluster.createDatabase(name);
      await cluster.replica!.caughtUp();
      t = await createTestApp({
        listen: true,
        database: { url: primary.url(name), name, drop: async () => undefined },
        env: {
          DATABASE_URL: primary.url(name),
          DATABASE_REPLICA_URLS: replica.url(name),
          DATABASE_PREPARED_STATEMENTS: 'off',
          IDEMPOTENCY_REPLAY_CACHE: '0',
          CARD_NETWORK_DELAY: '50ms',
        },
      });
      await cluster.replica!.caughtUp();
    });
    afterAll(async () => {
      await t?.close();
      await replica?.stop();
      await primary?.stop();
      await cluster?.destroy();
    });

    it('100 identical payments charge once', async () => {
      const key = randomUUID();
      const description = `pooled replicas race ${key}`;
      const body = paymentBody({ amount: 777, description });
      const answers = await Promise.all(
        Array.from({ length: 100 }, () => timed(request(t.url!).post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body))),
      );
      console.log(`pgbouncer with replicas: 100 identical payments: ${JSON.stringify(histogram(answers))}`);
      expect(answers.filter((a) => a.status === 201 && a.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
      for (const a of answers) expect([201, 409]).toContain(a.status);
      expect(await Ledger.of(t).chargesDescribed(description)).toHaveLength(1);
      expect(await countRows(t.dataSource, 'payments', 'description = $1', [description])).toBe(1);
    });

    it('a retry right after the 201 is its replay (keys from the primary); the listing (the replica) lags, then shows it', async () => {
      const key = randomUUID();
      const description = `pooled replicas retry ${key}`;
      const post = () => request(t.url!).post('/payments').set(t.auth()).set('Idempotency-Key', key).send(paymentBody({ amount: 4321, description }));
      const first = await post().expect(201);
      const retry = await post();
      const listing = await request(t.url!).get('/payments?limit=100').set(t.auth()).expect(200);
      const listed = (res: request.Response) => (res.body.data as { id: string }[]).some((p) => p.id === first.body.id);
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.text).toBe(first.text);
      // The listing (read after the retry) does not show it yet: the retry ran while the replica lagged.
      expect(listed(listing)).toBe(false);
      await waitFor('the replica to list the payment', async () => listed(await request(t.url!).get('/payments?limit=100').set(t.auth())) || undefined, {
        timeoutMs: 15_000,
        intervalMs: 100,
      });
      expect(await Ledger.of(t).chargesDescribed(description)).toHaveLength(1);
    });
  });

  describe('DATABASE_DIRECT_URL alone declares the pooler: statements are unnamed by default', () => {
    const apps: AppProcess[] = [];
    beforeAll(freshDatabase);
    afterAll(async () => {
      await stopAll(apps);
      await dropDatabase();
    });

    it('two instances, 100 identical payments: one charge, no 500', async () => {
      const env = pooledEnv({ DATABASE_DIRECT_URL: db.url });
      delete env.DATABASE_PREPARED_STATEMENTS;
      await startAppProcesses([{ env }, { env }], apps);
      for (const app of apps) expect(app.output()).toContain('database mode: transaction pooler at DATABASE_URL (unnamed statements; waits LISTEN');
      const key = randomUUID();
      const description = `pgbouncer default ${key}`;
      const body = { amount: 1234, currency: 'usd', source: 'tok_visa', description };
      const responses = await Promise.all(Array.from({ length: 100 }, (_, i) => pay(apps[i % 2], key, body)));
      console.log(`pgbouncer with DATABASE_DIRECT_URL and the default statements: ${JSON.stringify(counts(responses))}`);
      expect(responses.filter((r) => r.status !== 201 && r.status !== 409).map((r) => `${r.status} ${r.text}`)).toEqual([]);
      expect(responses.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
      expect(await network.ledger.chargesDescribed(description)).toHaveLength(1);
    });
  });

  describe('control: prepared statements on, as PgBouncer before 1.21 cannot carry them', () => {
    const apps: AppProcess[] = [];
    beforeAll(freshDatabase);
    afterAll(async () => {
      await stopAll(apps);
      await dropDatabase();
    });

    it('the same requests fail with 500: prepared statement "..." already exists / does not exist', async () => {
      // The direct URL keeps the rest as above (no session parameter, migrations direct): only the statements differ.
      const env = pooledEnv({ DATABASE_PREPARED_STATEMENTS: 'on', DATABASE_DIRECT_URL: db.url, LOG_LEVEL: 'error' });
      await startAppProcesses([{ env }, { env }], apps);
      expect(apps[0].output()).toContain('database mode: transaction pooler at DATABASE_URL (named statements;');
      const key = randomUUID();
      const body = { amount: 1234, currency: 'usd', source: 'tok_visa', description: `control ${key}` };
      const responses = await Promise.all(Array.from({ length: 100 }, (_, i) => pay(apps[i % 2], key, body)));
      const h = counts(responses);
      console.log(`pgbouncer control (prepared statements on): ${JSON.stringify(h)}`);
      expect(h['500']).toBeGreaterThan(0);
      const logged = apps.map((a) => a.output()).join('\n');
      expect(logged).toMatch(/prepared statement \\?"[A-Za-z0-9_]+\\?" (already exists|does not exist)/);
    });
  });
});
