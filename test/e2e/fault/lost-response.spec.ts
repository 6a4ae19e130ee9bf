import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { Client } from 'pg';
import { AppProcess, PROCESS_CLIENT, startAppProcess, stopAll } from '../../support/app-process';
import { TestDatabase, createTestDatabase } from '../../support/database';
import { authHeaders, send, waitFor } from '../../support/http-client';
import { keyIs } from '../../support/keys';

/**
 * The response is lost: the client's socket dies while the server is still
 * working (card network 500 ms). The server commits anyway, and the retry gets
 * the stored 201 with Idempotent-Replayed: true and the same payment: the
 * client never pays twice for a response it did not see.
 */
jest.setTimeout(120_000);

describe('fault: the client loses the response', () => {
  let db: TestDatabase;
  let pg: Client;
  let app: AppProcess | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
    pg = new Client({ connectionString: db.url });
    await pg.connect();
    app = await startAppProcess({ env: { DATABASE_URL: db.url, CARD_NETWORK_DELAY: '500ms' } });
  });
  afterAll(async () => {
    await stopAll([app]);
    await pg?.end().catch(() => undefined);
    await db?.drop();
  });

  it('commits although the client hung up, and the retry replays the stored 201', async () => {
    const key = randomUUID();
    const description = `lost response ${key}`;
    const body = { amount: 4321, currency: 'gbp', source: 'tok_mastercard', description };
    const payload = Buffer.from(JSON.stringify(body));
    const url = new URL('/payments', app!.url);

    let responded = false;
    const req = request(url, {
      method: 'POST',
      agent: false,
      headers: { ...authHeaders(PROCESS_CLIENT.key, key), 'Content-Type': 'application/json', 'Content-Length': String(payload.length) },
    });
    req.on('response', (res) => {
      responded = true;
      res.resume();
    });
    const hungUp = new Promise<Error>((resolve) => req.on('error', resolve));
    req.end(payload);

    // Hang up once the request has been read and its key claimed (the body is
    // parsed before the interceptor runs) and while the key is still in
    // progress: the handler is then waiting on the card network.
    await waitFor(
      'the key to be claimed and still in progress',
      async () => (await pg.query(`SELECT 1 FROM idempotency_keys WHERE ${keyIs()} AND status IS NULL`, [key])).rowCount === 1,
    );
    req.destroy();
    const error = await hungUp;
    expect(responded).toBe(false);
    expect(error.message).toMatch(/socket hang up|aborted|ECONNRESET/);

    // The server finishes and commits the payment with its stored response.
    const stored = await waitFor(
      'the key to be completed',
      async () => {
        const { rows } = await pg.query<{ status: number | null; body: string }>(`SELECT status, body FROM idempotency_keys WHERE ${keyIs()}`, [key]);
        return rows[0]?.status !== null && rows[0]?.status !== undefined ? rows[0] : undefined;
      },
      { timeoutMs: 15_000 },
    );
    expect(stored.status).toBe(201);
    const paymentId = JSON.parse(stored.body).id as string;
    expect(paymentId).toMatch(/^[0-9a-f-]{36}$/);

    const retry = await send(app!.url, { method: 'POST', path: '/payments', headers: authHeaders(PROCESS_CLIENT.key, key), body });
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.headers.location).toBe(`/payments/${paymentId}`);
    expect(retry.text).toBe(stored.body);
    expect(retry.json()).toMatchObject({ id: paymentId, status: 'succeeded', amount: 4321, currency: 'gbp', description });

    const got = await send(app!.url, { path: `/payments/${paymentId}`, headers: authHeaders(PROCESS_CLIENT.key) });
    expect(got.status).toBe(200);
    expect(got.json()).toMatchObject({ id: paymentId, description });

    const { rows } = await pg.query<{ id: string }>('SELECT id FROM payments WHERE description = $1', [description]);
    expect(rows.map((r) => r.id)).toEqual([paymentId]);
  });
});
