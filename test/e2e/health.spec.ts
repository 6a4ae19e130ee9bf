import { Client } from 'pg';
import request from 'supertest';
import { HEALTH_RESULT_TTL_MS } from '../../src/health/health.service';
import { TestApp, createTestApp, metricsAuth } from '../support/app';
import { adminUrl } from '../support/database';
import { waitFor } from '../support/http-client';

/**
 * GET /health answers from a database check at most a second old: a burst of
 * requests costs the database one check, whether it is up (200) or down (503
 * problem+json). The checks that really ran are counted by
 * health_checks_total{outcome} on /metrics.
 */
describe('GET /health (e2e)', () => {
  let t: TestApp;
  const health = () => request(t.url!).get('/health');

  /** The database checks run so far with this outcome. */
  async function checks(outcome: 'up' | 'down'): Promise<number> {
    const res = await request(t.url!).get('/metrics').set(metricsAuth()).expect(200);
    const match = new RegExp(`^health_checks_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(res.text);
    return match ? Number(match[1]) : 0;
  }

  /** 50 requests at once, each on its own connection; the time they took. */
  async function burst(): Promise<{ responses: request.Response[]; ms: number }> {
    const started = performance.now();
    const responses = await Promise.all(Array.from({ length: 50 }, () => health()));
    return { responses, ms: performance.now() - started };
  }

  /** The most checks a cache of HEALTH_RESULT_TTL_MS allows in `ms`. */
  const mostChecksIn = (ms: number) => 1 + Math.floor(ms / HEALTH_RESULT_TTL_MS);

  /** Refuses (or allows again) new connections to the app's database, and ends the open ones. */
  async function setDatabaseReachable(reachable: boolean): Promise<void> {
    const admin = new Client({ connectionString: adminUrl() });
    await admin.connect();
    try {
      const name = admin.escapeIdentifier(t.db.name);
      await admin.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS ${reachable ? 'true' : 'false'}`);
      if (!reachable) await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [t.db.name]);
    } finally {
      await admin.end();
    }
  }

  beforeAll(async () => {
    t = await createTestApp({ listen: true });
  });
  afterAll(async () => {
    await setDatabaseReachable(true);
    await t.close();
  });

  it('answers 50 concurrent requests 200 from one database check', async () => {
    expect(await checks('up')).toBe(0);
    const { responses, ms } = await burst();
    for (const res of responses) {
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: 'ok', info: { database: { status: 'up' } } });
    }
    const ran = await checks('up');
    expect(ran).toBeGreaterThanOrEqual(1);
    expect(ran).toBeLessThanOrEqual(mostChecksIn(ms));
  });

  it('checks again once its result is older than a second, never more often', async () => {
    const before = await checks('up');
    const started = performance.now();
    await waitFor(
      'a second database check',
      async () => {
        await health().expect(200);
        return (await checks('up')) >= before + 2;
      },
      { intervalMs: 50 },
    );
    expect((await checks('up')) - before).toBeLessThanOrEqual(mostChecksIn(performance.now() - started));
  });

  it('answers 50 concurrent requests 503 problem+json while the database refuses connections, from one check', async () => {
    await setDatabaseReachable(false);
    // The last good result expires within a second.
    await waitFor('GET /health to answer 503', async () => (await health()).status === 503, { intervalMs: 50 });
    const before = await checks('down');
    const { responses, ms } = await burst();
    for (const res of responses) {
      expect(res.status).toBe(503);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.headers['retry-after']).toMatch(/^\d+$/);
      expect(res.body).toMatchObject({ status: 503, code: 'service_unavailable', detail: 'The database does not answer.' });
    }
    expect((await checks('down')) - before).toBeLessThanOrEqual(mostChecksIn(ms));

    await setDatabaseReachable(true);
    await waitFor('GET /health to answer 200 again', async () => (await health()).status === 200, { intervalMs: 50 });
  });
});

/**
 * The check pings on a connection of its own: an app whose every pooled
 * connection is taken (a busy moment) still answers 200 while the database
 * does. On the app's pool the ping would wait for a connection until the
 * check's timeout, and answer 503.
 */
describe('GET /health with the app pool exhausted (e2e)', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp({ listen: true, env: { DATABASE_POOL_SIZE: '2' } });
  });
  afterAll(async () => {
    await t.close();
  });

  it('answers 200 from a check on its own connection', async () => {
    const held = [t.dataSource.createQueryRunner(), t.dataSource.createQueryRunner()];
    for (const runner of held) await runner.connect();
    try {
      const res = await request(t.url!).get('/health');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: 'ok', info: { database: { status: 'up' } } });
    } finally {
      for (const runner of held) await runner.release();
    }
  });
});
