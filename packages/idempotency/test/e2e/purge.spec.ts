import { randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { Client } from 'pg';
import { Registry } from 'prom-client';
import request from 'supertest';
import { IdempotencyModuleOptions, IdempotencyPurgeService } from 'safe-retries';
import { DemoModule } from '../support/demo/widgets.module';
import { NOW_US, PURGE_LOCK_ID, keyId, keyIdSql } from '../support/keys-table';
import { LIBRARY_TABLE, LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from '../support/library-app';
import { countRows } from '../support/test-services';
import { waitFor } from '../support/wait-for';

/**
 * The purge job on a real PostgreSQL: it deletes only what retention and the
 * lease allow, never blocks claims, runs once across instances, and expiry holds
 * without it. Correctness only: every wait is a bounded poll; the one timing
 * taken proves requests were answered inside a purge run, not how fast.
 */
const OPTIONS: IdempotencyModuleOptions = { retention: '2s', lease: '1s' };

describe('purge of expired idempotency keys (e2e)', () => {
  const KEYS = `"${LIBRARY_TABLE}"`;
  const PRINCIPAL = 'client-a';
  const registry = new Registry();
  let t: LibraryApp;
  const http = (app: LibraryApp = t) => request(app.app.getHttpServer());
  const post = (key: string, body: object, app: LibraryApp = t) =>
    http(app).post('/demo/widgets').set(PRINCIPAL_HEADER, PRINCIPAL).set('Idempotency-Key', key).send(body);
  const purger = (app: LibraryApp = t) => app.app.get(IdempotencyPurgeService);
  /** Rows written by insertKey belong to this scope, which no request uses. */
  const DIRECT = 'written-directly';
  /** The key's rows: a request's, and one insertKey wrote. */
  const ids = (key: string) => [keyId(PRINCIPAL, key), keyId(DIRECT, key)];
  const keyRows = (key: string) => countRows(t.dataSource, KEYS, 'id = ANY($1::uuid[])', [ids(key)]);
  const keyIs = 'id = $1';
  const widgets = (name: string) => countRows(t.dataSource, 'demo_widgets', 'name = $1', [name]);
  const expiredOnDbClock = (key: string) =>
    waitFor(`key ${key} to pass its retention`, async () => {
      const rows = await t.dataSource.query<{ expired: boolean }[]>(`SELECT expires_at <= now() AS expired FROM ${KEYS} WHERE id = ANY($1::uuid[])`, [ids(key)]);
      return rows[0]?.expired === true;
    });
  /** A key row written directly, its lease and expiry relative to the database clock. */
  const insertKey = (key: string, o: { leaseInMs: number; expiresInMs: number; status: number | null; recovery?: object }) =>
    t.dataSource.query(
      `INSERT INTO ${KEYS} (id, fingerprint, lease, expires_at, status, body, recovery)
       VALUES ($6::uuid, substring(sha256(convert_to($1::text, 'UTF8')) FROM 1 FOR 16),
               ${NOW_US} + $2::int8 * 1000,
               now() + $3::int8 * interval '1 millisecond', $4::int2, CASE WHEN $4::int2 IS NULL THEN NULL ELSE '{}' END, $5::jsonb)`,
      [key, o.leaseInMs, o.expiresInMs, o.status, o.recovery ? JSON.stringify(o.recovery) : null, keyId(DIRECT, key)],
    );
  /** A metric of the app's registry: its value, or that of one of its series (a histogram's `_count`). */
  const counterValue = async (metric: string, name?: string) => {
    const { values } = await registry.getSingleMetric(metric)!.get();
    return values.find((v) => name === undefined || (v as { metricName?: string }).metricName === name)?.value ?? 0;
  };
  const advisoryLockHolders = async () => {
    const rows = await t.dataSource.query<{ n: string }[]>(
      `SELECT count(*)::text AS n FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND classid = 0 AND objid = $1 AND objsubid = 1
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      [PURGE_LOCK_ID],
    );
    return Number(rows[0].n);
  };

  beforeAll(async () => {
    t = await createLibraryApp('fastify', { imports: [DemoModule], idempotency: { ...OPTIONS, registry } });
  });
  afterAll(() => t.close());

  it('deletes a key past its retention; reusing the key then runs the request anew', async () => {
    const [purgedBefore, runsBefore] = [
      await counterValue('idempotency_purge_deleted_keys_total'),
      await counterValue('idempotency_purge_run_duration_seconds', 'idempotency_purge_run_duration_seconds_count'),
    ];
    const key = randomUUID();
    const first = await post(key, { name: 'expired' }).expect(201);
    await expiredOnDbClock(key);

    const result = await purger().purgeOnce();
    expect(result.skipped).toBe(false);
    expect(result.deleted).toBeGreaterThanOrEqual(1);
    expect(result.batches).toBeGreaterThanOrEqual(1);
    expect(await keyRows(key)).toBe(0);
    expect(await counterValue('idempotency_purge_deleted_keys_total')).toBe(purgedBefore + result.deleted);
    expect(await counterValue('idempotency_purge_run_duration_seconds', 'idempotency_purge_run_duration_seconds_count')).toBe(runsBefore + 1);

    const again = await post(key, { name: 'expired' }).expect(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.body.id).not.toBe(first.body.id);
    expect(await widgets('expired')).toBe(2);
  });

  it('keeps a key inside its retention: it still replays after a purge', async () => {
    const key = randomUUID();
    const first = await post(key, { name: 'kept' }).expect(201);
    const result = await purger().purgeOnce();
    expect(result.skipped).toBe(false);
    expect(await keyRows(key)).toBe(1);

    const replay = await post(key, { name: 'kept' }).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.id).toBe(first.body.id);
    expect(await widgets('kept')).toBe(1);
  });

  it('deletes completed and abandoned keys past retention, never an in-progress key whose lease is valid nor an operation at a recovery point', async () => {
    const k = {
      completedExpired: `m-completed-expired-${randomUUID()}`,
      completedKept: `m-completed-kept-${randomUUID()}`,
      abandonedExpired: `m-abandoned-expired-${randomUUID()}`,
      inProgressExpired: `m-in-progress-expired-${randomUUID()}`,
      inProgressKept: `m-in-progress-kept-${randomUUID()}`,
      operationExpired: `m-operation-expired-${randomUUID()}`,
    };
    await insertKey(k.completedExpired, { leaseInMs: -60_000, expiresInMs: -1_000, status: 201 });
    await insertKey(k.completedKept, { leaseInMs: -60_000, expiresInMs: 60_000, status: 201 });
    // Owner crashed: lease over, still in progress, past retention.
    await insertKey(k.abandonedExpired, { leaseInMs: -1_000, expiresInMs: -1_000, status: null });
    // Owner still working (valid lease) although the key is past its retention.
    await insertKey(k.inProgressExpired, { leaseInMs: 60_000, expiresInMs: -1_000, status: null });
    await insertKey(k.inProgressKept, { leaseInMs: 60_000, expiresInMs: 60_000, status: null });
    // An operation whose outside effect may have happened (a charge): lease over, past retention, to be resumed.
    const recovery = { operation: 'purge.unregistered', point: 'intent', state: {}, status: 201, scope: 'x', key: k.operationExpired };
    await insertKey(k.operationExpired, { leaseInMs: -60_000, expiresInMs: -60_000, status: null, recovery });

    const result = await purger().purgeOnce();
    expect(result.skipped).toBe(false);
    expect(result.deleted).toBeGreaterThanOrEqual(2);
    expect({
      completedExpired: await keyRows(k.completedExpired),
      completedKept: await keyRows(k.completedKept),
      abandonedExpired: await keyRows(k.abandonedExpired),
      inProgressExpired: await keyRows(k.inProgressExpired),
      inProgressKept: await keyRows(k.inProgressKept),
      operationExpired: await keyRows(k.operationExpired),
    }).toEqual({ completedExpired: 0, completedKept: 1, abandonedExpired: 0, inProgressExpired: 1, inProgressKept: 1, operationExpired: 1 });
  });

  it('keeps the key of a request in flight even when its retention has passed; the completion starts the retention anew', async () => {
    // A second instance with a long lease, so the lease is surely valid during the purge.
    const slow = await createLibraryApp('fastify', { database: t.db, imports: [DemoModule], idempotency: { lease: '30s', retention: '1m' } });
    try {
      const key = randomUUID();
      const inFlight = post(key, { name: 'in-flight', delay_ms: 1500 }, slow).then((r) => r);
      await waitFor('the claim', async () => (await keyRows(key)) === 1);
      await t.dataSource.query(`UPDATE ${KEYS} SET expires_at = now() - interval '1 second' WHERE ${keyIs}`, [keyId(PRINCIPAL, key)]);

      const result = await purger().purgeOnce();
      expect(result.skipped).toBe(false);
      expect(await countRows(t.dataSource, KEYS, `${keyIs} AND status IS NULL`, [keyId(PRINCIPAL, key)])).toBe(1);

      const response = await inFlight;
      expect(response.status).toBe(201);
      expect(await countRows(t.dataSource, KEYS, `${keyIs} AND status = 201`, [keyId(PRINCIPAL, key)])).toBe(1);
      expect(await widgets('in-flight')).toBe(1);

      // Its retention starts at the completion: kept for the route's minute from now...
      await purger().purgeOnce();
      expect(await keyRows(key)).toBe(1);
      expect(
        await countRows(t.dataSource, KEYS, `${keyIs} AND expires_at > now() + interval '50 seconds' AND expires_at <= now() + interval '1 minute'`, [
          keyId(PRINCIPAL, key),
        ]),
      ).toBe(1);
      // ...and purged once that has passed.
      await t.dataSource.query(`UPDATE ${KEYS} SET expires_at = now() - interval '1 second' WHERE ${keyIs}`, [keyId(PRINCIPAL, key)]);
      await purger().purgeOnce();
      expect(await keyRows(key)).toBe(0);
    } finally {
      await slow.close();
    }
  });

  it('runs once across instances: while one instance purges, another skips', async () => {
    const other = await createLibraryApp('fastify', { database: t.db, idempotency: OPTIONS });
    const blocker = new Client({ connectionString: t.db.url });
    await blocker.connect();
    try {
      const key = `two-${randomUUID()}`;
      await insertKey(key, { leaseInMs: -60_000, expiresInMs: -1_000, status: 201 });
      // Hold the first purger inside its run: its DELETE waits for this table lock.
      await blocker.query('BEGIN');
      await blocker.query(`LOCK TABLE ${KEYS} IN SHARE MODE`);
      const first = purger().purgeOnce();
      await waitFor('the first purger to hold the purge lock', async () => (await advisoryLockHolders()) === 1);

      const second = await purger(other).purgeOnce();
      expect(second).toEqual({ deleted: 0, messages: 0, outbox: 0, batches: 0, durationMs: expect.any(Number), skipped: true });

      await blocker.query('COMMIT');
      const firstResult = await first;
      expect(firstResult.skipped).toBe(false);
      expect(firstResult.deleted).toBeGreaterThanOrEqual(1);
      expect(await keyRows(key)).toBe(0);
      expect(await advisoryLockHolders()).toBe(0);
    } finally {
      await blocker.query('ROLLBACK').catch(() => undefined);
      await blocker.end();
      await other.close();
    }
  });

  it('skips while another session holds the purge lock, and purges once it is free', async () => {
    const key = `held-${randomUUID()}`;
    await insertKey(key, { leaseInMs: -60_000, expiresInMs: -1_000, status: 201 });
    const holder = new Client({ connectionString: t.db.url });
    await holder.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [PURGE_LOCK_ID]);
      const skipped = await purger().purgeOnce();
      expect(skipped.skipped).toBe(true);
      expect(await keyRows(key)).toBe(1);

      await holder.query('SELECT pg_advisory_unlock($1)', [PURGE_LOCK_ID]);
      const ran = await purger().purgeOnce();
      expect(ran.skipped).toBe(false);
      expect(await keyRows(key)).toBe(0);
    } finally {
      await holder.end();
    }
  });

  it('never overlaps itself in one process: a run requested during a run is skipped', async () => {
    const [a, b] = await Promise.all([purger().purgeOnce(), purger().purgeOnce()]);
    expect(a.skipped).toBe(false);
    expect(b).toEqual({ deleted: 0, messages: 0, outbox: 0, batches: 0, durationMs: 0, skipped: true });
    // The flag is cleared when the run ends.
    expect((await purger().purgeOnce()).skipped).toBe(false);
  });

  it('with the purge job switched off, an expired key still behaves as new', async () => {
    expect(t.app.get(IdempotencyPurgeService).scheduled).toBe(false);
    const key = randomUUID();
    const first = await post(key, { name: 'no-purge' }).expect(201);
    await expiredOnDbClock(key);
    expect(await keyRows(key)).toBe(1); // nothing purged it

    const again = await post(key, { name: 'no-purge' }).expect(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.body.id).not.toBe(first.body.id);
    expect(await widgets('no-purge')).toBe(2);
    // And the new execution is the one replayed from now on.
    const replay = await post(key, { name: 'no-purge' }).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.id).toBe(again.body.id);
  });

  it('runs on its schedule when enabled, and stops on shutdown', async () => {
    const key = `scheduled-${randomUUID()}`;
    await insertKey(key, { leaseInMs: -60_000, expiresInMs: -1_000, status: 201 });
    // The purge runs every second.
    const scheduled = await createLibraryApp('fastify', { database: t.db, idempotency: { ...OPTIONS, purge: { enabled: true, cron: '* * * * * *' } } });
    const purge = scheduled.app.get(IdempotencyPurgeService);
    let closed = false;
    try {
      expect(purge.scheduled).toBe(true);
      await waitFor('the scheduled purge to delete the expired key', async () => (await keyRows(key)) === 0);

      await scheduled.close();
      closed = true;
      expect(purge.scheduled).toBe(false);
    } finally {
      if (!closed) await scheduled.close();
    }
  });

  it('logs and counts a failed run without throwing from the tick; the next run works', async () => {
    const failuresBefore = await counterValue('idempotency_purge_failures_total');
    const errors = jest.spyOn(Logger.prototype, 'error');
    const key = `after-failure-${randomUUID()}`;
    await insertKey(key, { leaseInMs: -60_000, expiresInMs: -1_000, status: 201 });
    await t.dataSource.query(`ALTER TABLE ${KEYS} RENAME TO "${LIBRARY_TABLE} away"`);
    try {
      await expect(purger().runScheduled()).resolves.toBeUndefined();
      expect(await counterValue('idempotency_purge_failures_total')).toBe(failuresBefore + 1);
      expect(errors).toHaveBeenCalledWith(expect.stringMatching(new RegExp(`purge .*failed: .*${LIBRARY_TABLE}`)), expect.anything());
      await expect(purger().purgeOnce()).rejects.toThrow(LIBRARY_TABLE);
      expect(await counterValue('idempotency_purge_failures_total')).toBe(failuresBefore + 2);
      // The failed runs released the lock (and their connection).
      expect(await advisoryLockHolders()).toBe(0);
    } finally {
      errors.mockRestore();
      await t.dataSource.query(`ALTER TABLE "${LIBRARY_TABLE} away" RENAME TO ${KEYS}`);
    }
    const next = await purger().purgeOnce();
    expect(next.skipped).toBe(false);
    expect(await keyRows(key)).toBe(0);
  });

  it('purges 100,000 expired keys in batches while claims keep answering', async () => {
    // The bulk rows are told apart by their lease, -42: they are completed, so it is never compared again.
    const bulkClient = randomUUID();
    const bulkRows = () => countRows(t.dataSource, KEYS, 'lease = -42');
    await t.dataSource.query(
      `INSERT INTO ${KEYS} (id, fingerprint, lease, expires_at, status, body)
       SELECT ${keyIdSql('$1::text', "'bulk-' || g")}, substring(sha256(g::text::bytea) FROM 1 FOR 16), -42, now() - interval '1 hour', 201, '{}'
         FROM generate_series(1, 100000) g`,
      [bulkClient],
    );
    expect(await bulkRows()).toBe(100_000);

    let purgeEnded: number | undefined;
    const purgeStarted = performance.now();
    const purging = purger().purgeOnce();
    purging.then(
      () => (purgeEnded = performance.now()),
      () => (purgeEnded = performance.now()),
    );
    // Waves of new requests until the purge has finished, each request timed.
    const requests: { status: number; started: number; ended: number }[] = [];
    const timedPost = async () => {
      const started = performance.now();
      const res = await post(randomUUID(), { name: 'during-purge' });
      return { status: res.status, started, ended: performance.now() };
    };
    do {
      requests.push(...(await Promise.all(Array.from({ length: 10 }, timedPost))));
    } while (purgeEnded === undefined);
    const result = await purging;
    const statuses = requests.map((r) => r.status);
    // The point of the test: requests were answered while the purge ran, not only before or after it.
    const inside = requests.filter((r) => r.started >= purgeStarted && r.ended <= purgeEnded!);
    console.log(`purge: ${result.batches} batches in ${result.durationMs} ms; ${inside.length} of ${requests.length} requests answered inside the run`);
    expect(inside.length).toBeGreaterThanOrEqual(1);

    expect(result.skipped).toBe(false);
    expect(result.batches).toBeGreaterThanOrEqual(20);
    expect(result.deleted).toBeGreaterThanOrEqual(100_000);
    expect(await bulkRows()).toBe(0);
    expect(statuses.length).toBeGreaterThanOrEqual(10);
    expect(statuses.every((s) => s === 201)).toBe(true);
    expect(await widgets('during-purge')).toBe(statuses.length);
  });
});
