import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { IdempotencyRecovery } from 'safe-retries';
import { TestApp, countRows, createTestApp } from '../support/app';
import { CardNetworkProcess, Ledger, paymentsDescribed as paymentsDescribedIn, reconcilePayment, startCardNetworkProcess, networkAppEnv } from '../support/card-network';
import { NOW_US } from '../support/db-clock';
import { createPayment, paymentBody } from '../support/fixtures';
import { keyIs } from '../support/keys';

/**
 * Only the card network's own word about an operation settles it. The network
 * is a process of its own (its ledger outlives every attempt); after each case
 * the ledger is reconciled: exactly one succeeded intent per operation, and one
 * recorded payment.
 *
 * - An answer speaks only for the call it answers: a charge whose answer was
 *   lost, then a retry (or the recovery job) refused with 401, 429 or 400, is
 *   still an unknown outcome (503, key kept); the next good retry finds the one
 *   charge. The same for a refund, and for a refusal met by the SDK's own resend.
 * - A resume after the network forgot its idempotency keys asks about the
 *   intent it recorded (or looks the refund up) instead of sending again.
 * - A card that needs its holder to authenticate is a stored 402.
 */
jest.setTimeout(120_000);

const KEY_TTL_MS = 1_000;

describe('the card network is believed only about the call it answers (e2e)', () => {
  let network: CardNetworkProcess;
  let ledger: Ledger;
  let t: TestApp;
  const http = () => request(t.app.getHttpServer());
  const pay = (key: string, body: object) => http().post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body);

  beforeAll(async () => {
    // A short key window, so that a resume past it is reachable in a test.
    network = await startCardNetworkProcess({ env: { CARD_NETWORK_KEY_TTL: `${KEY_TTL_MS}ms` } });
    ledger = network.ledger;
    t = await createTestApp({
      env: networkAppEnv(network),
    });
  });
  afterAll(async () => {
    await t?.close();
    await network?.stop();
  });
  afterEach(() => ledger?.clearFaults());

  const keyRow = async (key: string) =>
    (
      await t.dataSource.query<{ status: number | null; point: string | null; yielded: boolean }[]>(
        `SELECT status, recovery->>'point' AS point, lease <= ${NOW_US} AS yielded FROM idempotency_keys WHERE ${keyIs()}`,
        [key],
      )
    )[0];
  const paymentsDescribed = (description: string) => paymentsDescribedIn(t.dataSource, description);

  /** The card network's intent recorded for a payment. */
  const intentOf = async (paymentId: string) =>
    (await t.dataSource.query<{ network_charge_id: string }[]>('SELECT network_charge_id FROM payments WHERE id = $1', [paymentId]))[0].network_charge_id;

  /** One operation, one succeeded intent at the network, one succeeded payment here, and they match. */
  const reconcile = (description: string) => reconcilePayment(t.dataSource, ledger, description);

  /** The first attempt: the network charges, its answer is lost (a 500 after the charge). */
  async function chargeWithLostAnswer(key: string, description: string) {
    const body = paymentBody({ source: 'tok_chargeThenError', description });
    const unknown = await pay(key, body).expect(503);
    expect(unknown.body.code).toBe('card_network_unavailable');
    expect(await ledger.chargesDescribed(description)).toHaveLength(1);
    expect(await keyRow(key)).toMatchObject({ status: null, point: 'intent', yielded: true });
    return body;
  }

  describe.each([
    [401, 'the secret key was rotated'],
    [429, 'a rate limit'],
    [400, 'a refused request'],
  ] as const)('a lost answer, then %s (%s) on the next attempt', (status, _why) => {
    it('a retry refused is still unknown (503, key and payment kept); the next retry records the one charge', async () => {
      const key = randomUUID();
      const description = `refused retry ${status} ${key}`;
      const body = await chargeWithLostAnswer(key, description);

      await ledger.refuse(status);
      const refused = await pay(key, body).expect(503);
      expect(refused.headers['retry-after']).toBe('1');
      expect(refused.body.code).toBe('card_network_unavailable');
      expect(await keyRow(key)).toMatchObject({ status: null, point: 'intent' });
      expect((await paymentsDescribed(description)).map((p) => p.status)).toEqual(['processing']);

      const resumed = await pay(key, body).expect(201);
      expect(resumed.body).toMatchObject({ status: 'succeeded', description });
      const replay = await pay(key, body).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(resumed.text);
      expect(await reconcile(description)).toBe(resumed.body.id);
    });

    it('the same through the recovery job alone', async () => {
      const key = randomUUID();
      const description = `refused recovery ${status} ${key}`;
      const body = await chargeWithLostAnswer(key, description);
      const recovery = t.app.get(IdempotencyRecovery);

      await ledger.refuse(status);
      expect(await recovery.runOnce()).toMatchObject({ taken: 1, finished: 0, released: 0, failed: 1 });
      expect(await keyRow(key)).toMatchObject({ status: null, point: 'intent', yielded: true });

      expect(await recovery.runOnce()).toMatchObject({ taken: 1, finished: 1 });
      const id = await reconcile(description);
      const replay = await pay(key, body).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body.id).toBe(id);
    });
  });

  it('a refund whose answer is lost, then refused on the retry, is made once', async () => {
    const payment = await createPayment(t, paymentBody({ amount: 1000, description: `refund refused ${randomUUID()}` }));
    const intent = await intentOf(payment.id);
    const key = randomUUID();
    const refund = () => http().post(`/payments/${payment.id}/refunds`).set(t.auth()).set('Idempotency-Key', key).send({ amount: 400 });

    await ledger.fault('error', 1);
    expect((await refund().expect(503)).body.code).toBe('card_network_unavailable');
    expect(await ledger.refunds(intent)).toHaveLength(1);
    // The resume's lookup is refused: still unknown, nothing released.
    await ledger.refuse(400);
    await refund().expect(503);
    const made = await refund().expect(201);
    expect(made.body).toMatchObject({ amount: 400, status: 'succeeded' });
    expect((await ledger.refunds(intent)).map((r) => [r.amount, r.metadata.refund_id])).toEqual([[400, made.body.id]]);
    expect((await http().get(`/payments/${payment.id}`).set(t.auth()).expect(200)).body.amount_refunded).toBe(400);
  });

  it("a refusal met by the SDK's own resend speaks only for the resend: the refund that was made is found and recorded", async () => {
    const payment = await createPayment(t, paymentBody({ amount: 900, description: `sdk resend ${randomUUID()}` }));
    const intent = await intentOf(payment.id);
    // The first send refunds and its connection is reset; the SDK resends it with
    // our key (it does so for a reset even with no retries configured), and that
    // resend is refused (400). The refund is looked up and found, never given up.
    await ledger.fault('drop', 1);
    await ledger.refuse(400, 1, 1);
    const made = await http().post(`/payments/${payment.id}/refunds`).set(t.auth()).set('Idempotency-Key', randomUUID()).send({}).expect(201);
    expect(made.body).toMatchObject({ amount: 900, status: 'succeeded' });
    expect((await ledger.refunds(intent)).map((r) => r.metadata.refund_id)).toEqual([made.body.id]);
  });

  describe('a resume after the network forgot its keys', () => {
    const pastTheKeyWindow = () => new Promise((resolve) => setTimeout(resolve, KEY_TTL_MS + 300));

    it('a payment charged with its answer lost is found by its intent, not charged again', async () => {
      const key = randomUUID();
      const description = `key window ${key}`;
      const body = paymentBody({ source: 'tok_chargeThenHang', description });
      await pay(key, body).expect(503);
      expect(await keyRow(key)).toMatchObject({ point: 'intent' });
      await pastTheKeyWindow();

      const resumed = await pay(key, body).expect(201);
      expect(resumed.body.status).toBe('succeeded');
      expect(await reconcile(description)).toBe(resumed.body.id);
    });

    it('a payment whose intent was never recorded creates a new unconfirmed one: still one charge', async () => {
      const key = randomUUID();
      const description = `key window start ${key}`;
      const body = paymentBody({ description });
      // The creation's answer is lost: no intent recorded, nothing confirmed.
      await ledger.fault('hang', 1);
      await pay(key, body).expect(503);
      expect(await keyRow(key)).toMatchObject({ point: 'started' });
      await pastTheKeyWindow();

      await pay(key, body).expect(201);
      await reconcile(description);
      const intents = (await ledger.intents()).filter((i) => i.description === description);
      expect(intents.map((i) => i.status).sort()).toEqual(['requires_confirmation', 'succeeded']);
    });

    it('a refund made with its answer lost is found by its metadata, not made again', async () => {
      const payment = await createPayment(t, paymentBody({ amount: 1000, description: `refund window ${randomUUID()}` }));
      const intent = await intentOf(payment.id);
      const key = randomUUID();
      const refund = () => http().post(`/payments/${payment.id}/refunds`).set(t.auth()).set('Idempotency-Key', key).send({ amount: 250 });
      await ledger.fault('hang', 1);
      await refund().expect(503);
      await pastTheKeyWindow();

      const made = await refund().expect(201);
      expect((await ledger.refunds(intent)).map((r) => [r.amount, r.metadata.refund_id])).toEqual([[250, made.body.id]]);
    });
  });

  it('a card that needs its holder to authenticate is a stored 402 authentication_required, replayed', async () => {
    const key = randomUUID();
    const body = paymentBody({ source: 'tok_authenticationRequired', description: `3ds ${key}` });
    const declined = await pay(key, body).expect(402);
    expect(declined.body).toMatchObject({ code: 'authentication_required', payment_id: expect.any(String) });
    const [row] = await paymentsDescribed(body.description);
    expect(row).toMatchObject({ id: declined.body.payment_id, status: 'failed' });
    expect(await keyRow(key)).toMatchObject({ status: 402 });
    const replay = await pay(key, body).expect(402);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(declined.text);
    expect(await ledger.chargesDescribed(body.description)).toHaveLength(0);
    expect(await countRows(t.dataSource, 'payments', 'description = $1', [body.description])).toBe(1);
  });
});
