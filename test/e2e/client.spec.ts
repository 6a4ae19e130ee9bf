import { randomUUID } from 'node:crypto';
import { PaymentsClient, ProblemError, RetryEvent } from '@safe-retries/client';
import { CLIENT_A, TestApp, countRows, createTestApp } from '../support/app';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { send, waitFor } from '../support/http-client';
import { keyIs } from '../support/keys';

/**
 * The retrying client against the real server, through a fault-injecting proxy:
 * a lost response, a request still in progress, a 503 with Retry-After, and a
 * 422 that must not be retried.
 */
describe('PaymentsClient against the real server (e2e)', () => {
  let t: TestApp;
  let proxy: FaultProxy;
  let retries: RetryEvent[];
  const client = () =>
    new PaymentsClient({ baseUrl: proxy.url, apiKey: CLIENT_A.key, baseDelayMs: 50, maxDelayMs: 2_000, onRetry: (e) => retries.push(e) });

  beforeAll(async () => {
    t = await createTestApp({ listen: true, env: { CARD_NETWORK_DELAY: '300ms' } });
    proxy = await startFaultProxy(t.url!);
  });
  beforeEach(() => {
    retries = [];
    proxy.seen.length = 0;
  });
  afterAll(async () => {
    await proxy.close();
    await t.close();
  });

  it('recovers a lost response: the retry returns the original payment, replayed, and there is one payment', async () => {
    const description = `lost ${randomUUID()}`;
    proxy.plan('drop-response');
    const res = await client().createPayment({ amount: 1200, currency: 'usd', source: 'tok_visa', description });
    expect(res.status).toBe(201);
    expect(res.replayed).toBe(true);
    expect(res.attempts).toBe(2);
    expect(retries[0]).toMatchObject({ attempt: 1, reason: 'network' });
    // The server had committed the first attempt: the same key was sent twice.
    expect(proxy.seen.map((s) => s.fault)).toEqual(['drop-response', 'pass']);
    expect(proxy.seen[0].upstreamStatus).toBe(201);
    expect(proxy.seen[1].key).toBe(proxy.seen[0].key);
    expect(await countRows(t.dataSource, 'payments', 'description = $1', [description])).toBe(1);
    const [row] = await t.dataSource.query<{ id: string }[]>('SELECT id FROM payments WHERE description = $1', [description]);
    expect(res.body.id).toBe(row.id);
  });

  it('retries a 409 while the first attempt is in progress, then gets the 201', async () => {
    const idempotencyKey = randomUUID();
    const body = { amount: 1300, currency: 'usd', source: 'tok_visa', description: `busy ${idempotencyKey}` };
    // Another attempt with the same key is already running on the server.
    const first = send(t.url!, { method: 'POST', path: '/payments', headers: { ...t.auth(), 'Idempotency-Key': idempotencyKey }, body });
    await waitFor('the first attempt to hold the key', async () =>
      (await countRows(t.dataSource, 'idempotency_keys', `${keyIs()} AND status IS NULL`, [idempotencyKey])) === 1,
    );
    const res = await client().createPayment(body, { idempotencyKey });
    expect(res.status).toBe(201);
    expect(retries[0]).toMatchObject({ attempt: 1, reason: 'status', status: 409 });
    expect(res.attempts).toBeGreaterThanOrEqual(2);
    const original = await first;
    expect(res.body.id).toBe(original.json<{ id: string }>().id);
    expect(res.replayed).toBe(true);
    expect(await countRows(t.dataSource, 'payments', 'description = $1', [body.description])).toBe(1);
  });

  it('honours Retry-After on a 503, then succeeds', async () => {
    proxy.plan('unavailable');
    const res = await client().createPayment({ amount: 1400, currency: 'usd', source: 'tok_visa' });
    expect(res.status).toBe(201);
    expect(res.replayed).toBe(false);
    expect(res.attempts).toBe(2);
    // The wait came from Retry-After (1 s), not from the 50 ms backoff.
    expect(retries).toHaveLength(1);
    expect(retries[0]).toMatchObject({ reason: 'status', status: 503, delayMs: 1000 });
  });

  it('does not retry a 422: the reused key is a final answer', async () => {
    const idempotencyKey = randomUUID();
    await client().createPayment({ amount: 1500, currency: 'usd', source: 'tok_visa' }, { idempotencyKey });
    proxy.seen.length = 0;
    const error = await client()
      .createPayment({ amount: 1600, currency: 'usd', source: 'tok_visa' }, { idempotencyKey })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProblemError);
    expect((error as ProblemError).status).toBe(422);
    expect((error as ProblemError).code).toBe('idempotency_key_reused');
    expect((error as ProblemError).attempts).toBe(1);
    expect(proxy.seen).toHaveLength(1);
    expect(retries).toHaveLength(0);
  });

  it('does not retry a declined card (402) either', async () => {
    const error = await client().createPayment({ amount: 1700, currency: 'usd', source: 'tok_chargeDeclined' }).catch((e: unknown) => e);
    expect((error as ProblemError).code).toBe('card_declined');
    expect(proxy.seen).toHaveLength(1);
  });
});
