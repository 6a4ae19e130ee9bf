import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DevPostgres, startPostgres } from '@safe-retries/dev-postgres';
import { AppProcess, PROCESS_CLIENT, startAppProcess, stopAll } from '../../support/app-process';
import { RawResponse, authHeaders, send, waitFor } from '../../support/http-client';
import { keyIn, keyIs } from '../../support/keys';

/**
 * PostgreSQL goes away under a running app and comes back on the same port.
 * During the outage every request answers 503 problem+json (code
 * service_unavailable, Retry-After), never a hang (an unanswered request fails
 * the test), a 500, a stack trace or SQL; /health is 503. How long each answer
 * took is printed. When the server is back the same process recovers by
 * itself, the key used during the outage charges exactly once, and the
 * payments table holds exactly the payments that were answered 201.
 *
 * Runs its OWN PostgreSQL (a temporary one of @safe-retries/dev-postgres), never the shared one.
 */
jest.setTimeout(120_000);

const PROBLEM_MEMBERS = ['code', 'detail', 'status', 'title', 'type'];

function expectUnavailable(res: RawResponse, what: string): void {
  expect({ what, status: res.status }).toEqual({ what, status: 503 });
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(res.headers['retry-after']).toMatch(/^\d+$/);
  const body = res.json<Record<string, unknown>>();
  expect(body).toMatchObject({ status: 503, code: 'service_unavailable' });
  expectNoLeak(res);
}

/** Nothing but the problem members: no stack, no driver error, no SQL. */
function expectNoLeak(res: RawResponse): void {
  expect(Object.keys(res.json<Record<string, unknown>>()).sort()).toEqual(PROBLEM_MEMBERS);
  expect(res.text).not.toMatch(/\n\s+at |\bat .+\.(js|ts):\d+|stack/i);
  expect(res.text).not.toMatch(/\b(SELECT|INSERT|UPDATE|DELETE|BEGIN|COMMIT)\b|idempotency_keys|payments\b.*\bWHERE/);
  expect(res.text).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|terminat|postgres/i);
}

describe('fault: the database goes away and comes back', () => {
  let server: DevPostgres;
  let databaseUrl: string;
  let app: AppProcess | undefined;
  const times: string[] = [];

  /** One query on a fresh connection (the server restarts under us). */
  async function query<T extends Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
    const client = new Client({ connectionString: databaseUrl, connectionTimeoutMillis: 3_000 });
    await client.connect();
    try {
      return (await client.query<T>(sql, params)).rows;
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  const headers = (key?: string) => authHeaders(PROCESS_CLIENT.key, key);
  const pay = (key: string, body: object) => send(app!.url, { method: 'POST', path: '/payments', headers: headers(key), body });

  /** A request during the outage, its time printed. */
  async function timed(what: string, request: () => Promise<RawResponse>): Promise<RawResponse> {
    const res = await request();
    times.push(`${what}: ${res.status} in ${res.ms.toFixed(0)} ms`);
    console.log(`database-outage: ${what} -> ${res.status} in ${res.ms.toFixed(0)} ms`);
    return res;
  }

  async function waitHealthy(): Promise<number> {
    const started = Date.now();
    await waitFor('GET /health to answer 200 again', async () => (await send(app!.url, { path: '/health', timeoutMs: 5_000 })).status === 200, {
      timeoutMs: 30_000,
      intervalMs: 200,
    });
    return Date.now() - started;
  }

  /** An original (not replayed) 201; its payment id is added to `charged`. */
  async function charge(charged: Set<string>, key: string, body: object): Promise<RawResponse> {
    const res = await pay(key, body);
    expect({ status: res.status, text: res.text }).toMatchObject({ status: 201 });
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    charged.add(res.json<{ id: string }>().id);
    return res;
  }

  /**
   * Each test stands alone on the shared server: it starts it if an earlier test
   * stopped it and failed, waits for the app to be healthy, and judges only the
   * payments made after this point.
   */
  async function freshStart(): Promise<{ paymentsBefore: Set<string> }> {
    if (!server.isRunning()) await server.start();
    await waitHealthy();
    return { paymentsBefore: new Set((await query<{ id: string }>('SELECT id FROM payments')).map((p) => p.id)) };
  }

  /** The payments made since `freshStart()`. */
  async function newPayments(before: Set<string>): Promise<string[]> {
    return (await query<{ id: string }>('SELECT id FROM payments')).map((p) => p.id).filter((id) => !before.has(id)).sort();
  }

  beforeAll(async () => {
    server = await startPostgres();
    databaseUrl = await server.createDatabase('outage');
    app = await startAppProcess({
      env: { DATABASE_URL: databaseUrl, CARD_NETWORK_DELAY: '1s', IDEMPOTENCY_LEASE: '3s', CARD_NETWORK_TIMEOUT: '2s', CARD_NETWORK_MAX_RETRIES: '0' },
    });
  });

  afterAll(async () => {
    if (times.length) console.log(`database-outage timings:\n  ${times.join('\n  ')}`);
    await stopAll([app]);
    await server?.destroy();
  });

  it('answers 503 problem+json while PostgreSQL is down, recovers without a restart, and charges once', async () => {
    const { paymentsBefore } = await freshStart();
    /** Payment ids of every original (not replayed) 201 of this test. */
    const charged = new Set<string>();
    const beforeKey = randomUUID();
    const before = await charge(charged, beforeKey, { amount: 1100, currency: 'usd', source: 'tok_visa', description: 'before the outage' });
    expect(before.json()).toMatchObject({ status: 'succeeded', amount: 1100 });
    expect((await send(app!.url, { path: '/orders', headers: headers() })).status).toBe(200);
    const pid = app!.pid;

    await server.stop();

    const key = randomUUID();
    const body = { amount: 2200, currency: 'usd', source: 'tok_visa', description: 'keyed during the outage' };
    expectUnavailable(await timed('POST /payments (new key)', () => pay(key, body)), 'POST /payments');
    expectUnavailable(await timed('GET /orders', () => send(app!.url, { path: '/orders', headers: headers() })), 'GET /orders');
    expectUnavailable(await timed('POST /payments (same key again)', () => pay(key, body)), 'POST /payments again');
    expectUnavailable(await timed('GET /health', () => send(app!.url, { path: '/health' })), 'GET /health');
    expect(app!.hasExited()).toBe(false);

    await server.start();
    const recoveredIn = await waitHealthy();
    console.log(`database-outage: /health 200 again ${recoveredIn} ms after PostgreSQL started`);
    expect(app!.hasExited()).toBe(false);
    expect(app!.pid).toBe(pid);

    // The key refused during the outage was never claimed: it charges now, once.
    const after = await charge(charged, key, body);
    const replay = await pay(key, body);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(after.text);
    expect((await send(app!.url, { path: '/orders', headers: headers() })).status).toBe(200);

    // Exactly the payments that got an original 201; both keys completed.
    expect(await newPayments(paymentsBefore)).toEqual([...charged].sort());
    const keys = await query<{ status: number | null }>(`SELECT status FROM idempotency_keys WHERE ${keyIn()}`, [[beforeKey, key]]);
    expect(keys.map((k) => k.status)).toEqual([201, 201]);
  });

  // When the connection of the open transaction dies, TypeORM releases its query
  // runner and the handler's next query throws QueryRunnerProviderAlreadyReleasedError:
  // that, too, is the database being unavailable (503, retry), not a 500.
  it('a payment in flight when PostgreSQL stops answers 503 service_unavailable, and the retry charges once', async () => {
    const { paymentsBefore } = await freshStart();
    const charged = new Set<string>();
    const key = randomUUID();
    const body = { amount: 3300, currency: 'usd', source: 'tok_visa', description: `in flight ${key}` };
    const inFlight = pay(key, body).then(
      (res) => ({ res }),
      (error: Error) => ({ error }),
    );
    // Past its Start phase (the payment is processing, the key has its recovery point)
    // and now inside its 1 s card network call. Waiting only for the claim raced the
    // Start phase's commit against the outage (a flaky failure on a loaded machine).
    await waitFor(
      'the in-flight payment to pass its Start phase',
      async () => (await query(`SELECT 1 FROM idempotency_keys WHERE ${keyIs()} AND recovery IS NOT NULL`, [key])).length === 1,
    );
    await server.stop();

    const outcome = await inFlight;
    if ('error' in outcome) throw new Error(`the in-flight request got no HTTP answer: ${outcome.error.message}`);
    const res0 = outcome.res;
    times.push(`POST /payments in flight: ${res0.status} in ${res0.ms.toFixed(0)} ms`);
    console.log(`database-outage: POST /payments in flight -> ${res0.status} in ${res0.ms.toFixed(0)} ms`);
    expectUnavailable(res0, 'POST /payments in flight');
    expect(app!.hasExited()).toBe(false);

    await server.start();
    await waitHealthy();
    // The Start phase had committed before the outage: the payment is processing
    // and the key keeps its recovery point (nothing could release or yield it).
    const started = await query<{ id: string; status: string }>('SELECT id, status FROM payments WHERE description = $1', [body.description]);
    expect(started).toEqual([{ id: expect.any(String), status: 'processing' }]);

    // Retries get 409 (Retry-After: 1) until the lease ends, then one resumes the same payment.
    let res = await pay(key, body);
    for (let i = 0; i < 10 && res.status === 409; i++) {
      expect(res.json()).toMatchObject({ code: 'idempotency_request_in_progress' });
      await new Promise((r) => setTimeout(r, Number(res.headers['retry-after'] ?? 1) * 1000));
      res = await pay(key, body);
    }
    expect({ status: res.status, text: res.text }).toMatchObject({ status: 201 });
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    charged.add(res.json<{ id: string }>().id);
    const replay = await pay(key, body);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(res.text);

    const mine = await query<{ id: string }>('SELECT id FROM payments WHERE description = $1', [body.description]);
    expect(mine.map((p) => p.id)).toEqual([res.json<{ id: string }>().id]);
    expect(mine[0].id).toBe(started[0].id);
    expect(await newPayments(paymentsBefore)).toEqual([...charged].sort());
    expect(await query(`SELECT id FROM idempotency_keys WHERE ${keyIs()} AND status IS NULL`, [key])).toEqual([]);
  });
});
