import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { migrations } from '../../../migrations';
import { AppProcess, PROCESS_CLIENT, startAppProcesses, stopAll } from '../../support/app-process';
import { TestDatabase, createTestDatabase } from '../../support/database';
import { RawResponse, authHeaders, send } from '../../support/http-client';
import { holdClientKey, keyIs } from '../../support/keys';

/**
 * Two real app processes on ONE database, booted together on an empty schema,
 * then R runs of N identical concurrent POST /payments (one fresh key a run)
 * split across both, their claims held to meet in the claim's window: the
 * claim is atomic in PostgreSQL, so it holds across instances: exactly one
 * payment a run, every answer a 201 (original or replay) or a 409 in
 * progress, never a 5xx.
 */
jest.setTimeout(120_000);

const RUNS = Math.max(1, Number(process.env.RACE_RUNS ?? 3) || 3);
const N = 50;

describe('fault: two instances on one database', () => {
  let db: TestDatabase;
  let pg: Client;
  const apps: AppProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    const env = {
      DATABASE_URL: db.url,
      CARD_NETWORK_DELAY: '50ms',
      LOG_LEVEL: 'warn',
    };
    // Both boot at the same time on the empty database: both run the migrator.
    await startAppProcesses([{ env }, { env }], apps);
    pg = new Client({ connectionString: db.url });
    await pg.connect();
  });

  afterAll(async () => {
    await stopAll(apps);
    await pg?.end().catch(() => undefined);
    await db?.drop();
  });

  it('boots both instances together on an empty database; each migration is applied exactly once', async () => {
    expect(apps).toHaveLength(2);
    expect(apps[0].pid).not.toBe(apps[1].pid);
    for (const app of apps) expect((await send(app.url, { path: '/health' })).status).toBe(200);

    const { rows } = await pg.query<{ name: string; n: number }>(
      'SELECT name, count(*)::int AS n FROM migrations GROUP BY name ORDER BY name',
    );
    const expected = migrations.map((m) => new m().name).sort();
    expect(rows.map((r) => r.name)).toEqual(expected);
    for (const row of rows) expect(row).toEqual({ name: row.name, n: 1 });
  });

  it(`takes exactly one payment per key when ${N} identical requests race across both instances (${RUNS} runs)`, async () => {
    const totals: Record<string, number> = {};
    for (let run = 1; run <= RUNS; run++) {
      const key = randomUUID();
      const description = `two-instances run ${run} ${key}`;
      const body = { amount: 1234, currency: 'usd', source: 'tok_visa', description };

      // The claims meet in the claim's one window every run (packages/idempotency/test/support/claim-window.ts):
      // a claim that let two of them win would answer the earlier owner 409 lease lost.
      const held = await holdClientKey(db.url, key);
      const sent = Promise.all(
        Array.from({ length: N }, (_, i) =>
          send(apps[i % 2].url, {
            method: 'POST',
            path: '/payments',
            headers: authHeaders(PROCESS_CLIENT.key, key),
            body,
            timeoutMs: 30_000,
          }).then(
            (res) => ({ instance: i % 2, res }),
            (error: Error) => ({ instance: i % 2, error }),
          ),
        ),
      );

      let met: number;
      try {
        met = await held.claimsWaiting(2);
      } finally {
        await held.release();
      }
      const outcomes = await sent;

      const histogram: Record<string, number> = {};
      for (const o of outcomes) {
        const label = 'error' in o ? `error ${o.error.message}` : o.res.headers['idempotent-replayed'] === 'true' ? `${o.res.status} replayed` : String(o.res.status);
        histogram[label] = (histogram[label] ?? 0) + 1;
        totals[label] = (totals[label] ?? 0) + 1;
      }
      console.log(`two-instances run ${run}/${RUNS} (N=${N}): ${JSON.stringify(histogram)}, ${met} claims met in the claim's window`);

      const errors = outcomes.filter((o) => 'error' in o);
      expect(errors).toEqual([]);
      const responses = outcomes.map((o) => (o as { instance: number; res: RawResponse }).res);

      // Never a 5xx; only 201 (original or replay) and 409 (in progress).
      expect(responses.filter((r) => r.status !== 201 && r.status !== 409).map((r) => `${r.status} ${r.text}`)).toEqual([]);

      const originals = responses.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined);
      expect(originals.map((r) => r.json<{ id: string }>().id)).toHaveLength(1);
      const original = originals[0];
      const paymentId = original.json<{ id: string }>().id;
      expect(original.json()).toMatchObject({ status: 'succeeded', amount: 1234, currency: 'usd', description });

      for (const replay of responses.filter((r) => r.status === 201 && r !== original)) {
        expect(replay.headers['idempotent-replayed']).toBe('true');
        expect(replay.json<{ id: string }>().id).toBe(paymentId);
        expect(replay.text).toBe(original.text);
      }
      for (const conflict of responses.filter((r) => r.status === 409)) {
        expect(conflict.json()).toMatchObject({ status: 409, code: 'idempotency_request_in_progress' });
        expect(conflict.headers['retry-after']).toMatch(/^\d+$/);
      }

      // Exactly one payment for the run, and the stored response is that one.
      const payments = await pg.query<{ id: string }>('SELECT id FROM payments WHERE description = $1', [description]);
      expect(payments.rows.map((r) => r.id)).toEqual([paymentId]);
      const stored = await pg.query<{ status: number; body: string }>(`SELECT status, body FROM idempotency_keys WHERE ${keyIs()}`, [key]);
      expect(stored.rows).toHaveLength(1);
      expect(stored.rows[0].status).toBe(201);
      expect(stored.rows[0].body).toBe(original.text);
    }
    console.log(`two-instances totals over ${RUNS} runs: ${JSON.stringify(totals)}`);

    const all = await pg.query<{ n: number }>('SELECT count(*)::int AS n FROM payments');
    expect(all.rows[0].n).toBe(RUNS);
    for (const app of apps) expect(app.hasExited()).toBe(false);
  });

  it('both instances shut down cleanly on SIGTERM (exit code 0)', async () => {
    const codes = await Promise.all(apps.map((a) => a.stop()));
    expect(codes).toEqual([0, 0]);
  });
});
