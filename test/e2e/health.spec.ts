import { Client } from 'pg';
import request from 'supertest';
import { HEALTH_RESULT_TTL_MS } from '../../src/health/health.service';
import { TestApp, createTestApp, metricsAuth } from '../support/app';
import { adminUrl } from '../support/database';

/**
 * GET /health answers from a database check at most a second old: a burst of
 * requests costs the database one check, whether it is up (200) or down (503
 * problem+json). The checks that really ran are counted by
 * health_checks_total{outcome} on /metrics. The test holds this process's
 * Date still (jest's fake Date, every timer real) and moves it on by hand, so
 * a result's age is what the test says, however slow the machine.
 */
describe('GET /health (e2e)', () => {
  let t: TestApp;
  const health = () => request(t.url!).get('/health');
  /** Moves the held Date on by `ms`. */
  const age = (ms: number) => jest.setSystemTime(Date.now() + ms);

  /** The database checks run so far with this outcome. */
  async function checks(outcome: 'up' | 'down'): Promise<number> {
    const res = await request(t.url!).get('/metrics').set(metricsAuth()).expect(200);
    const match = new RegExp(`^health_checks_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(res.text);
    return match ? Number(match[1]) : 0;
  }

  /** 50 requests at once, each on its own connection. */
  const burst = () => Promise.all(Array.from({ length: 50 }, () => health()));

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
    // Only Date is held: every timer, performance.now() and the event loop stay real.
    jest.useFakeTimers({
      doNotFake: ['hrtime', 'nextTick', 'performance', 'queueMicrotask', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval', 'setTimeout', 'clearTimeout'],
    });
  });
  afterAll(async () => {
    jest.useRealTimers();
    await setDatabaseReachable(true);
    await t.close();
  });

  it('answers 50 concurrent requests 200 from one database check', async () => {
    expect(await checks('up')).toBe(0);
    for (const res of await burst()) {
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: 'ok', info: { database: { status: 'up' } } });
    }
    expect(await checks('up')).toBe(1);
  });

  it('checks again once its result is a second old, not sooner', async () => {
    const before = await checks('up');
    age(HEALTH_RESULT_TTL_MS - 1);
    await health().expect(200);
    expect(await checks('up')).toBe(before);
    age(1);
    await burst();
    expect(await checks('up')).toBe(before + 1);
  });

  it('answers 50 concurrent requests 503 problem+json while the database refuses connections, from one check', async () => {
    await setDatabaseReachable(false);
    // The last good result answers until it is a second old.
    await health().expect(200);
    age(HEALTH_RESULT_TTL_MS);
    const before = await checks('down');
    for (const res of await burst()) {
      expect(res.status).toBe(503);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.headers['retry-after']).toMatch(/^\d+$/);
      expect(res.body).toMatchObject({ status: 503, code: 'service_unavailable', detail: 'The database does not answer.' });
    }
    expect(await checks('down')).toBe(before + 1);

    await setDatabaseReachable(true);
    await health().expect(503);
    age(HEALTH_RESULT_TTL_MS);
    await health().expect(200);
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
