import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { CLIENT_B, TestApp, countRows, createTestApp } from '../support/app';
import { orderBody, paymentBody } from '../support/fixtures';
import { waitFor } from '../support/http-client';
import { keyIs } from '../support/keys';
import { lockTableWrites } from '../../packages/idempotency/test/support/table-lock';

/**
 * GET /idempotency-keys/{key}: where the operation sent with a key stands,
 * for the client that owns the key, without running, claiming or writing
 * anything: unknown, in progress (with the seconds until a retry may take it
 * over), or completed (the stored status and when it stops being kept).
 */
describe('the outcome by key (e2e)', () => {
  let t: TestApp;
  const http = () => request(t.app.getHttpServer());
  const lookUp = (key: string, client?: { key: string }) => http().get(`/idempotency-keys/${encodeURIComponent(key)}`).set(t.auth(client));

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t?.close());

  it('a completed operation: its status and the end of its retention, counted from the outcome', async () => {
    const key = randomUUID();
    await http().post('/orders').set(t.auth()).set('Idempotency-Key', key).send(orderBody()).expect(201);
    const orders = await countRows(t.dataSource, 'orders');

    const found = await lookUp(key).expect(200);
    expect(found.body).toEqual({ key, state: 'completed', status: 201, expires_at: expect.any(String) });
    const [{ expected }] = await t.dataSource.query<{ expected: boolean }[]>(
      `SELECT abs(extract(epoch FROM $2::timestamptz - expires_at)) < 0.001 AS expected FROM idempotency_keys WHERE ${keyIs()}`,
      [key, found.body.expires_at],
    );
    expect(expected).toBe(true);
    const hoursLeft = (Date.parse(found.body.expires_at as string) - Date.now()) / 3_600_000;
    expect(hoursLeft).toBeGreaterThan(23.9);
    expect(hoursLeft).toBeLessThanOrEqual(24);
    // The quoted form is the same key; nothing ran again.
    expect((await lookUp(`"${key}"`).expect(200)).body).toEqual(found.body);
    expect(await countRows(t.dataSource, 'orders')).toBe(orders);
  });

  it('a stored business outcome (a declined payment) is completed with its status', async () => {
    const key = randomUUID();
    await http().post('/payments').set(t.auth()).set('Idempotency-Key', key).send(paymentBody({ source: 'tok_chargeDeclined' })).expect(402);
    expect((await lookUp(key).expect(200)).body).toMatchObject({ state: 'completed', status: 402 });
  });

  it('an operation still running: in progress, with the seconds its lease has left; then completed', async () => {
    const key = randomUUID();
    const orders = await countRows(t.dataSource, 'orders');
    // The order's INSERT waits on the test's lock: the request stays in progress until it is let go.
    const lock = await lockTableWrites(t.db.url, 'orders');
    const running = http().post('/orders').set(t.auth()).set('Idempotency-Key', key).send(orderBody()).then((r) => r);
    try {
      const during = await waitFor('the order to be in progress', async () => {
        const found = await lookUp(key).expect(200);
        return found.body.state === 'in_progress' && found;
      });
      expect(during.body).toEqual({ key, state: 'in_progress', retry_after: expect.any(Number) });
      expect(during.body.retry_after).toBeGreaterThan(0);
    } finally {
      await lock.release();
    }
    expect((await running).status).toBe(201);
    expect(await countRows(t.dataSource, 'orders')).toBe(orders + 1);
    expect((await lookUp(key).expect(200)).body).toMatchObject({ state: 'completed', status: 201 });
  });

  it("unknown: a key never sent, and another client's key (scoped to the caller)", async () => {
    expect((await lookUp(randomUUID()).expect(200)).body).toMatchObject({ state: 'unknown' });
    const key = randomUUID();
    await http().post('/orders').set(t.auth()).set('Idempotency-Key', key).send(orderBody()).expect(201);
    expect((await lookUp(key, CLIENT_B).expect(200)).body).toEqual({ key, state: 'unknown' });
  });

  it('an invalid key is the 400 of the Idempotency-Key header; no API key is 401', async () => {
    // The longest key, every character percent-encoded, is a valid path.
    expect((await lookUp('%'.repeat(255)).expect(200)).body).toMatchObject({ state: 'unknown' });
    const invalid = await lookUp('x'.repeat(256)).expect(400);
    expect(invalid.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(invalid.body.code).toBe('idempotency_key_invalid');
    await http().get(`/idempotency-keys/${randomUUID()}`).expect(401);
  });
});
