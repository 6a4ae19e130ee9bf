import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import request from 'supertest';
import { IdempotencyRecovery } from 'safe-retries';
import { TestApp, createTestApp } from '../../support/app';
import { Ledger } from '../../support/card-network';
import { TestDatabase, createTestDatabase } from '../../support/database';
import { NOW_US } from '../../support/db-clock';
import { paymentBody } from '../../support/fixtures';
import { waitFor } from '../../support/http-client';
import { keyIs } from '../../support/keys';
import { PgResetProxy, startPgResetProxy } from '../../support/pg-reset-proxy';

/**
 * The Start phase of a payment commits, but its acknowledgement is lost: the
 * connection resets after PostgreSQL executed the COMMIT and before the app
 * read the answer. The app sees an error from the checkpoint, so it believes no
 * recovery point committed; the key's release must not delete the key that
 * holds one (the payment would then stay `processing` forever, out of reach of
 * any retry or of the recovery job). The key is kept with its lease ended, and
 * the next attempt resumes: the client's retry, or the recovery job.
 *
 * Every connection of the app (its pool, the claim pool) goes through a TCP
 * proxy that resets the connection whose COMMIT ends a transaction with the
 * recovery point's statement (prepared as `idempotency_checkpoint`). The
 * assertions read the database directly, not through the proxy.
 */
jest.setTimeout(60_000);

/** The prepared statement that records a recovery point (PostgresIdempotencyStore.checkpoint). */
const CHECKPOINT_STATEMENT = 'idempotency_checkpoint';

describe('fault: the acknowledgement of the Start phase COMMIT is lost', () => {
  let db: TestDatabase;
  let proxy: PgResetProxy;
  let t: TestApp;
  let pg: Client;
  let ledger: Ledger;
  const http = () => request(t.app.getHttpServer());

  beforeAll(async () => {
    db = await createTestDatabase();
    proxy = await startPgResetProxy(db.url);
    t = await createTestApp({
      database: { ...db, url: proxy.url(db.url) },
      // A short lease (a network call with its resends must fit in it); the test never waits for it:
      // the release that answers the failure ends it at once.
      env: { IDEMPOTENCY_JOBS: 'off', IDEMPOTENCY_LEASE: '5s', CARD_NETWORK_TIMEOUT: '2s', CARD_NETWORK_MAX_RETRIES: '1' },
    });
    pg = new Client({ connectionString: db.url });
    await pg.connect();
    ledger = Ledger.of(t);
  });
  afterAll(async () => {
    await t?.close();
    await pg?.end().catch(() => undefined);
    await proxy?.close();
    await db?.drop();
  });

  const pay = (key: string, body: object) => http().post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body);

  interface KeyRow {
    status: number | null;
    recovery: { operation: string; point: string; state: { payment_id: string } } | null;
    lease_ended: boolean;
  }
  const keyRow = async (key: string) =>
    (await pg.query<KeyRow>(`SELECT status, recovery, lease <= ${NOW_US} AS lease_ended FROM idempotency_keys WHERE ${keyIs()}`, [key])).rows;
  const paymentsDescribed = async (description: string) =>
    (await pg.query<{ id: string; status: string }>('SELECT id, status FROM payments WHERE description = $1', [description])).rows;

  /**
   * POST /payments whose Start COMMIT takes effect but whose answer is lost.
   * Returns the processing payment it left.
   */
  async function payLosingStartAck(key: string, body: { description: string }): Promise<{ id: string }> {
    const resetsBefore = proxy.resets;
    proxy.armResetAfterCommit((tx) => tx.statements.includes(CHECKPOINT_STATEMENT));
    const first = await pay(key, body);
    expect(proxy.armed).toBe(false);

    // The proxy reset the Start phase's connection once, after PostgreSQL had committed it.
    expect(proxy.resets).toBe(resetsBefore + 1);
    expect(proxy.outcomes[proxy.outcomes.length - 1]).toBe('COMMIT');
    // The app saw the connection die mid-transaction (503, the database is unreachable):
    // a server-side failure, never an answer that claims an outcome.
    expect(first.status).toBeGreaterThanOrEqual(500);
    expect(first.status).toBeLessThan(600);

    // The Start phase did commit: a processing payment, and no charge yet.
    const payments = await paymentsDescribed(body.description);
    expect(payments).toEqual([{ id: expect.any(String), status: 'processing' }]);
    const payment = payments[0];
    expect(await ledger.charges({ key: 'payment_id', value: payment.id })).toHaveLength(0);

    // The key is kept with its committed recovery point, and its lease has ended
    // (the release that answered the failure ran before the 5xx was sent).
    const rows = await keyRow(key);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      status: null,
      recovery: { operation: 'payments.create', point: 'started', state: { payment_id: payment.id } },
      lease_ended: true,
    });
    return payment;
  }

  it('the client retry resumes the started payment: one charge, then replays', async () => {
    const key = randomUUID();
    const body = paymentBody({ amount: 1234, description: `lost start ack, retry ${key}` });
    const payment = await payLosingStartAck(key, body);

    const retry = await pay(key, body);
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(retry.body).toMatchObject({ id: payment.id, status: 'succeeded', amount: 1234 });
    expect(await paymentsDescribed(body.description)).toEqual([{ id: payment.id, status: 'succeeded' }]);

    const charges = await ledger.charges({ key: 'payment_id', value: payment.id });
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({ status: 'succeeded', amount: 1234, metadata: { payment_id: payment.id } });

    const replay = await pay(key, body);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(retry.text);
    expect(await ledger.charges({ key: 'payment_id', value: payment.id })).toHaveLength(1);
    expect(await keyRow(key)).toEqual([{ status: 201, recovery: null, lease_ended: expect.any(Boolean) }]);
  });

  it('with no retry, the recovery job resumes it: one charge, and a late retry replays', async () => {
    const key = randomUUID();
    const body = paymentBody({ amount: 4321, description: `lost start ack, recovery ${key}` });
    const payment = await payLosingStartAck(key, body);

    const run = await t.app.get(IdempotencyRecovery).runOnce();
    expect(run).toMatchObject({ taken: 1, finished: 1, failed: 0 });

    const done = await waitFor('the recovered payment to be recorded', async () => {
      const rows = await paymentsDescribed(body.description);
      return rows.length === 1 && rows[0].status !== 'processing' ? rows : undefined;
    });
    expect(done).toEqual([{ id: payment.id, status: 'succeeded' }]);
    const charges = await ledger.charges({ key: 'payment_id', value: payment.id });
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({ status: 'succeeded', amount: 4321 });
    expect(await keyRow(key)).toEqual([{ status: 201, recovery: null, lease_ended: expect.any(Boolean) }]);

    const late = await pay(key, body);
    expect(late.status).toBe(201);
    expect(late.headers['idempotent-replayed']).toBe('true');
    expect(late.body).toMatchObject({ id: payment.id, status: 'succeeded', amount: 4321 });
    expect(await ledger.charges({ key: 'payment_id', value: payment.id })).toHaveLength(1);
  });
});
