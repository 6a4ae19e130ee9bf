import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { IdempotencyPurgeService, IdempotencyRecovery } from 'safe-retries';
import { idempotencyStoreOf } from 'safe-retries/testing';
import { TestApp, countRows, createTestApp, metricsAuth } from '../support/app';
import { CardNetworkProcess, Ledger, paymentsDescribed as paymentsDescribedIn, reconcilePayment, startCardNetworkProcess } from '../support/card-network';
import { NOW_US } from '../support/db-clock';
import { createOrder, orderBody, paymentBody } from '../support/fixtures';
import { waitFor } from '../support/http-client';
import { keyIs } from '../support/keys';
import { StalledRenewals } from '../../packages/idempotency/test/support/stalled-renewals';

/**
 * Exactly-once over the clocks money settles on, with the card network as a
 * process of its own (its ledger outlives every attempt) and a reconciliation
 * after each case: the network's charges and refunds are the recorded ones.
 *
 * - Retention runs from the outcome: a payment left open by the network's
 *   refusals past IDEMPOTENCY_RETENTION is resumed by its retry (not 409, not a
 *   second payment), is never purged, and once settled is kept a full retention
 *   from then; the same when the network saved a 500 under its key for its key
 *   window.
 * - A refund's refusal met while an earlier send is still in flight releases
 *   nothing: 503, kept; the in-flight refund is found and recorded once.
 * - A definite refusal of a payment's parameter before its intent ends it:
 *   400, the key released, the order payable again.
 * - An intent the network does not know is held off for an operator (502,
 *   logged, counted), not a 503 loop.
 */
jest.setTimeout(120_000);

const LEASE_MS = 1_000;
const RETENTION_MS = 3_000;
const KEY_WINDOW_MS = 2_000;

describe('exactly-once over time (e2e)', () => {
  let network: CardNetworkProcess;
  let ledger: Ledger;
  let t: TestApp;
  let renewals: StalledRenewals;
  const http = () => request(t.app.getHttpServer());
  const pay = (key: string, body: object) => http().post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body);
  const refund = (paymentId: string, key: string, body: object) =>
    http().post(`/payments/${paymentId}/refunds`).set(t.auth()).set('Idempotency-Key', key).send(body);

  beforeAll(async () => {
    network = await startCardNetworkProcess({ env: { CARD_NETWORK_KEY_TTL: `${KEY_WINDOW_MS}ms` } });
    ledger = network.ledger;
    t = await createTestApp({
      env: {
        CARD_NETWORK_URL: network.url,
        CARD_NETWORK_MAX_RETRIES: '0',
        CARD_NETWORK_TIMEOUT: '10s',
        IDEMPOTENCY_LEASE: `${LEASE_MS}ms`,
        IDEMPOTENCY_RETENTION: `${RETENTION_MS}ms`,
        IDEMPOTENCY_JOBS: 'off',
      },
    });
    renewals = new StalledRenewals(idempotencyStoreOf(t.app).store);
  });
  afterAll(async () => {
    await t?.close();
    await network?.stop();
  });
  afterEach(() => ledger?.clearFaults());

  const keyRow = async (key: string) =>
    (
      await t.dataSource.query<{ status: number | null; point: string | null; expired: boolean; retained_ms: string; leased_ms: string }[]>(
        `SELECT status, recovery->>'point' AS point, expires_at <= now() AS expired,
                floor(extract(epoch FROM expires_at - now()) * 1000)::int8 AS retained_ms,
                ((lease - ${NOW_US}) / 1000)::int8 AS leased_ms
           FROM idempotency_keys WHERE ${keyIs()}`,
        [key],
      )
    )[0];
  const paymentsDescribed = (description: string) => paymentsDescribedIn(t.dataSource, description);

  /** One operation, one succeeded intent at the network, one succeeded payment here, and they match. */
  const reconcile = (description: string) => reconcilePayment(t.dataSource, ledger, description);

  /** By the database's clock: the key's retention, as set when it was claimed, has run out. */
  const pastRetention = (key: string) => waitFor('the retention to pass', async () => (await keyRow(key))?.expired === true, { seen: () => keyRow(key) });

  describe('retention runs from the outcome', () => {
    it('a payment the network keeps refusing outlives its retention: its retry resumes it, the job settles it, one charge', async () => {
      const key = randomUUID();
      const description = `outlives retention ${key}`;
      const body = paymentBody({ description });
      await ledger.refuse(429, 1_000);
      const refused = await pay(key, body).expect(503);
      expect(refused.body.code).toBe('card_network_unavailable');
      expect(await keyRow(key)).toMatchObject({ status: null, point: 'started' });

      await pastRetention(key);
      // Never purged while it can still be resumed.
      await t.app.get(IdempotencyPurgeService).purgeOnce();
      expect(await keyRow(key)).toMatchObject({ status: null, point: 'started' });
      // Its retry resumes it (the network still refuses): 503 again, never 409 and never a new payment.
      const again = await pay(key, body).expect(503);
      expect(again.body.code).toBe('card_network_unavailable');
      expect(await paymentsDescribed(description)).toHaveLength(1);

      await ledger.clearFaults();
      expect(await t.app.get(IdempotencyRecovery).runOnce()).toMatchObject({ taken: 1, finished: 1 });
      const id = await reconcile(description);
      // Settled now: kept a full retention from the outcome, so the retry replays it.
      expect(Number((await keyRow(key)).retained_ms)).toBeGreaterThan(RETENTION_MS - 1_500);
      const replay = await pay(key, body).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toMatchObject({ id, status: 'succeeded' });
      await reconcile(description);
    });

    it("a 500 the network saved under the payment's key is replayed for its key window; past it and past our retention the retry charges once", async () => {
      const key = randomUUID();
      const description = `saved 500 ${key}`;
      const body = paymentBody({ description });
      await ledger.fault('saved_error', 1);
      expect((await pay(key, body).expect(503)).body.code).toBe('card_network_unavailable');
      // Inside the network's key window: the same saved 500.
      expect((await pay(key, body).expect(503)).body.code).toBe('card_network_unavailable');
      expect(await ledger.intents().then((all) => all.filter((i) => i.description === description))).toHaveLength(0);

      await pastRetention(key);
      const resumed = await pay(key, body).expect(201);
      expect(resumed.headers['idempotent-replayed']).toBeUndefined();
      expect(await reconcile(description)).toBe(resumed.body.id);
      const replay = await pay(key, body).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(resumed.text);
    });
  });

  it('a refund refused on a takeover while the first send is still in flight is kept (503), then recorded once', async () => {
    const paid = await pay(randomUUID(), paymentBody({ amount: 1000, description: `refund in flight ${randomUUID()}` })).expect(201);
    const [{ network_charge_id: intent }] = await paymentsDescribed(paid.body.description);
    const key = randomUUID();
    const body = { amount: 300 };

    // The first attempt's send reaches the network and waits there; its owner stalls (no renewals).
    renewals.stall(key);
    await ledger.hold();
    const first = refund(paid.body.id, key, body).then((r) => r);
    await waitFor('the first send to reach the network', async () => (await ledger.held()) === 1);
    await waitFor('the stalled lease to run out', async () => (await keyRow(key))?.leased_ms !== undefined && Number((await keyRow(key)).leased_ms) <= 0);
    renewals.resume(key);

    // The retry takes over: its lookup cannot see the held send, its create is refused.
    await ledger.refuse(429, 1, 1);
    const refused = await refund(paid.body.id, key, body).expect(503);
    expect(refused.body.code).toBe('card_network_unavailable');
    expect(await countRows(t.dataSource, 'refunds', 'payment_id = $1', [paid.body.id])).toBe(1);

    // The first send now refunds; its owner lost the key and cannot record it.
    await ledger.release();
    expect((await first).status).toBe(409);
    const made = await refund(paid.body.id, key, body).expect(201);
    expect(made.body).toMatchObject({ amount: 300, status: 'succeeded' });

    const atNetwork = await ledger.refunds(intent!);
    expect(atNetwork.map((r) => [r.amount, r.metadata.refund_id])).toEqual([[300, made.body.id]]);
    const got = await http().get(`/payments/${paid.body.id}`).set(t.auth()).expect(200);
    expect(got.body.amount_refunded).toBe(300);
    expect(got.body.refunds.map((r: { id: string; amount: number }) => [r.id, r.amount])).toEqual([[made.body.id, 300]]);
    const replay = await refund(paid.body.id, key, body).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
  });

  it("a refusal naming the payment's amount before its intent ends it: 400, nothing kept, the order payable again", async () => {
    const order = await createOrder(t, orderBody({ items: [{ sku: 'sku_cap', quantity: 1, unit_amount: 2500 }] }));
    const key = randomUUID();
    const description = `definite refusal ${key}`;
    const body = paymentBody({ amount: 2500, order_id: order.id, description });
    await ledger.refuse(400, 1, 0, 'amount');
    const refused = await pay(key, body).expect(400);
    expect(refused.body).toMatchObject({ code: 'validation_failed', errors: [{ field: 'amount', messages: [expect.stringContaining('Invalid amount')] }] });
    expect(await keyRow(key)).toBeUndefined();
    expect(await paymentsDescribed(description)).toEqual([]);
    expect((await http().get(`/orders/${order.id}`).set(t.auth()).expect(200)).body.status).toBe('pending');

    // The same key, now accepted by the network, pays the order once.
    const paid = await pay(key, body).expect(201);
    expect(paid.body).toMatchObject({ status: 'succeeded', order_id: order.id });
    expect((await http().get(`/orders/${order.id}`).set(t.auth()).expect(200)).body.status).toBe('paid');
    await reconcile(description);
  });

  it('an intent the network does not know is held off for an operator: 502 once, logged and counted, then 409 and no job run', async () => {
    const key = randomUUID();
    const description = `unknown intent ${key}`;
    const body = paymentBody({ source: 'tok_chargeThenError', description });
    expect((await pay(key, body).expect(503)).body.code).toBe('card_network_unavailable');
    // As if the account behind the API key changed: the recorded intent is not the network's.
    await t.dataSource.query(
      `UPDATE idempotency_keys SET recovery = jsonb_set(recovery, '{state,intent_id}', '"pi_not_at_this_network"') WHERE ${keyIs()}`,
      [key],
    );
    const metric = async () =>
      Number(/card_network_unknown_objects_total\{object="intent"\} (\d+)/.exec((await http().get('/metrics').set(metricsAuth()).expect(200)).text)?.[1] ?? 0);
    const before = await metric();

    const held = await pay(key, body).expect(502);
    expect(held.body.code).toBe('card_network_object_unknown');
    expect(await metric()).toBe(before + 1);
    const row = await keyRow(key);
    expect(row).toMatchObject({ status: null, point: 'intent' });
    expect(Number(row.leased_ms)).toBeGreaterThan(50 * 60_000);
    expect((await pay(key, body).expect(409)).body.code).toBe('idempotency_request_in_progress');
    expect(await t.app.get(IdempotencyRecovery).runOnce()).toMatchObject({ taken: 0 });
    expect((await paymentsDescribed(description)).map((p) => p.status)).toEqual(['processing']);
    expect(await metric()).toBe(before + 1);
  });
});
