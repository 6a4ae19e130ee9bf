import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { IdempotencyRecovery } from 'safe-retries';
import { CLIENT_B, TestApp, countRows, createTestApp } from '../support/app';
import { Ledger } from '../support/card-network';
import { NOW_US } from '../support/db-clock';
import { createPayment, paymentBody } from '../support/fixtures';
import { keyIs } from '../support/keys';

/**
 * The charge boundary, seen from both sides: our tables and the card network's
 * own ledger (the embedded simulator, spoken to over HTTP through the Stripe
 * adapter). Faults are injected at the network: answers lost after the charge,
 * never sent, or turned into 500s.
 */
describe('payments through the card network (e2e)', () => {
  describe('with the SDK retrying (2 retries)', () => {
    let t: TestApp;
    let ledger: Ledger;
    const http = () => request(t.app.getHttpServer());

    beforeAll(async () => {
      t = await createTestApp({ env: { CARD_NETWORK_MAX_RETRIES: '2' } });
      ledger = Ledger.of(t);
    });
    afterAll(() => t.close());

    it('two clients with the same Idempotency-Key and body make two payments and two distinct charges', async () => {
      const key = `order-${randomUUID()}`;
      const body = paymentBody({ amount: 4321, description: `shared key ${key}` });
      const a = await http().post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body).expect(201);
      const b = await http().post('/payments').set(t.auth(CLIENT_B)).set('Idempotency-Key', key).send(body).expect(201);
      expect(a.body.id).not.toBe(b.body.id);
      const charges = await ledger.chargesDescribed(body.description as string);
      expect(charges).toHaveLength(2);
      expect(new Set(charges.map((c) => c.metadata.payment_id))).toEqual(new Set([a.body.id, b.body.id]));
    });

    it('an operation the adapter sends three times (two answers lost) is one charge, the same intent every time', async () => {
      const before = (await ledger.intents()).length;
      await ledger.fault('drop', 2);
      const payment = await createPayment(t, paymentBody({ amount: 2222 }));
      const intents = await ledger.intents();
      expect(intents).toHaveLength(before + 1);
      expect(intents[0].metadata.payment_id).toBe(payment.id);
      const [row] = await t.dataSource.query<{ network_charge_id: string }[]>('SELECT network_charge_id FROM payments WHERE id = $1', [payment.id]);
      expect(row.network_charge_id).toBe(intents[0].id);
    });
  });

  describe('with no SDK retries and a short timeout (every fault reaches the service)', () => {
    let t: TestApp;
    let ledger: Ledger;
    const http = () => request(t.app.getHttpServer());
    const pay = (key: string, body: object) => http().post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body);

    beforeAll(async () => {
      t = await createTestApp({ env: { CARD_NETWORK_MAX_RETRIES: '0', CARD_NETWORK_TIMEOUT: '400ms', IDEMPOTENCY_JOBS: 'off' } });
      ledger = Ledger.of(t);
    });
    afterAll(() => t.close());
    afterEach(() => ledger.clearFaults());

    const keyRow = async (key: string) =>
      (
        await t.dataSource.query<{ status: number | null; recovery: { point: string } | null; yielded: boolean }[]>(
          `SELECT status, recovery, lease <= ${NOW_US} AS yielded FROM idempotency_keys WHERE ${keyIs()}`,
          [key],
        )
      )[0];

    // The SDK retries a closed connection once even with retries off (with our key),
    // so two dropped answers are needed for the service to see one. A queued fault
    // hits the next POST, the unconfirmed intent's creation: nothing is charged yet.
    // The chargeThen* cards lose the answer of the charge itself (the confirm).
    it.each([
      ['the answer to the creation of the intent is lost (drop)', { fault: 'drop', times: 2 }, 'started', 0],
      ['no answer to the creation of the intent before the timeout (hang)', { fault: 'hang', times: 1 }, 'started', 0],
      ['a 500 comes after the intent was created (error)', { fault: 'error', times: 1 }, 'started', 0],
      ['no answer to the charge before the timeout (tok_chargeThenHang)', { source: 'tok_chargeThenHang' }, 'intent', 1],
      ['a 500 comes after the charge (tok_chargeThenError)', { source: 'tok_chargeThenError' }, 'intent', 1],
    ] as const)('%s: 503 card_network_unavailable, the key kept; the next retry resumes at once and records the one charge', async (_name, how, point, charged) => {
      const key = randomUUID();
      const source = 'source' in how ? how.source : 'tok_visa';
      const body = paymentBody({ amount: 1500, source, description: `unknown ${key}` });
      if ('fault' in how) await ledger.fault(how.fault, how.times);

      const unknown = await pay(key, body).expect(503);
      expect(unknown.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(unknown.body.code).toBe('card_network_unavailable');
      expect(unknown.headers['retry-after']).toBe('1');
      // Never a failure on a guess: the payment is processing, the key in progress at
      // its recovery point, with the lease given up so that a retry need not wait.
      const [payment] = await t.dataSource.query<{ id: string; status: string }[]>('SELECT id, status FROM payments WHERE description = $1', [body.description]);
      expect(payment.status).toBe('processing');
      expect(await keyRow(key)).toEqual({ status: null, recovery: expect.objectContaining({ point }), yielded: true });
      expect(await ledger.chargesDescribed(body.description)).toHaveLength(charged);

      const resumed = await pay(key, body).expect(201);
      expect(resumed.headers['idempotent-replayed']).toBeUndefined();
      expect(resumed.body).toMatchObject({ id: payment.id, status: 'succeeded' });
      expect(resumed.headers.location).toBe(`/payments/${payment.id}`);
      const replay = await pay(key, body).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(resumed.text);
      expect(await ledger.chargesDescribed(body.description)).toHaveLength(1);
      expect(await countRows(t.dataSource, 'payments', 'description = $1', [body.description])).toBe(1);
    });

    it('a card whose first answer is lost (tok_chargeThenDrop) is charged once: the SDK resent it with our key', async () => {
      const key = randomUUID();
      const body = paymentBody({ source: 'tok_chargeThenDrop', description: `drop ${key}` });
      const paid = await pay(key, body).expect(201);
      expect(paid.body.status).toBe('succeeded');
      expect(await ledger.chargesDescribed(body.description)).toHaveLength(1);
    });

    it('a card whose first answer never comes (tok_chargeThenHang) is 503, then charged once across the retry', async () => {
      const key = randomUUID();
      const body = paymentBody({ source: 'tok_chargeThenHang', description: `hang ${key}` });
      await pay(key, body).expect(503);
      const paid = await pay(key, body).expect(201);
      expect(paid.body.status).toBe('succeeded');
      expect(await ledger.chargesDescribed(body.description)).toHaveLength(1);
    });

    it('with no retry at all, the recovery job finishes the payment, and a later retry replays it', async () => {
      const key = randomUUID();
      const body = paymentBody({ amount: 2500, description: `abandoned ${key}` });
      await ledger.fault('hang', 1);
      await pay(key, body).expect(503);

      const recovered = await t.app.get(IdempotencyRecovery).runOnce();
      expect(recovered).toMatchObject({ finished: 1, failed: 0 });
      const [payment] = await t.dataSource.query<{ id: string; status: string; network_charge_id: string }[]>(
        'SELECT id, status, network_charge_id FROM payments WHERE description = $1',
        [body.description],
      );
      expect(payment.status).toBe('succeeded');
      const charges = await ledger.chargesDescribed(body.description);
      expect(charges.map((c) => c.id)).toEqual([payment.network_charge_id]);
      expect((await keyRow(key)).status).toBe(201);

      const replay = await pay(key, body).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toMatchObject({ id: payment.id, status: 'succeeded' });
      expect(replay.headers.location).toBe(`/payments/${payment.id}`);
    });

    it('a description PostgreSQL would refuse (U+0000) is 400 validation_failed before the network sees anything', async () => {
      const key = randomUUID();
      const before = (await ledger.intents()).length;
      const res = await pay(key, paymentBody({ description: 'nul \u0000 byte' })).expect(400);
      expect(res.body.code).toBe('validation_failed');
      expect(res.body.errors.map((e: { field: string }) => e.field)).toContain('description');
      expect((await ledger.intents()).length).toBe(before);
      expect(await countRows(t.dataSource, 'idempotency_keys', keyIs(), [key])).toBe(0);
    });

    it('a processing error before any charge is 502: no payment, nothing charged, the key free for a retry', async () => {
      const key = randomUUID();
      const body = paymentBody({ source: 'tok_processingError', description: `processing ${key}` });
      const res = await pay(key, body).expect(502);
      expect(res.body.code).toBe('card_network_error');
      expect(await countRows(t.dataSource, 'payments', 'description = $1', [body.description])).toBe(0);
      expect(await ledger.chargesDescribed(body.description)).toHaveLength(0);
      expect(await countRows(t.dataSource, 'idempotency_keys', keyIs(), [key])).toBe(0);
      await pay(key, body).expect(502);
    });

    it('a declined card is recorded as failed with the network record of the attempt', async () => {
      const key = randomUUID();
      const body = paymentBody({ source: 'tok_chargeDeclined', description: `declined ${key}` });
      const res = await pay(key, body).expect(402);
      const [row] = await t.dataSource.query<{ status: string; network_charge_id: string | null }[]>(
        'SELECT status, network_charge_id FROM payments WHERE id = $1',
        [res.body.payment_id],
      );
      expect(row.status).toBe('failed');
      const intent = (await ledger.intents()).find((i) => i.id === row.network_charge_id);
      expect(intent?.status).toBe('requires_payment_method');
    });

    it('refunds go through the network: never more refunded there than recorded, an unknown outcome resumes', async () => {
      const payment = await createPayment(t, paymentBody({ amount: 1000 }));
      const [{ network_charge_id: pi }] = await t.dataSource.query<{ network_charge_id: string }[]>(
        'SELECT network_charge_id FROM payments WHERE id = $1',
        [payment.id],
      );
      const refund = (key: string, amount?: number) =>
        http().post(`/payments/${payment.id}/refunds`).set(t.auth()).set('Idempotency-Key', key).send(amount ? { amount } : {});

      const first = await refund(randomUUID(), 300).expect(201);
      expect(first.body).toMatchObject({ amount: 300, status: 'succeeded' });

      const key = randomUUID();
      await ledger.fault('hang', 1);
      await refund(key, 500).expect(503);
      // Reserved while unknown: a refund of what would be left over it is refused.
      expect((await refund(randomUUID(), 300).expect(422)).body.code).toBe('refund_exceeds_payment');
      const resumed = await refund(key, 500).expect(201);
      expect(resumed.body).toMatchObject({ amount: 500, status: 'succeeded' });

      const atNetwork = await ledger.refunds(pi);
      expect(atNetwork.map((r) => r.amount).sort()).toEqual([300, 500]);
      const got = await http().get(`/payments/${payment.id}`).set(t.auth()).expect(200);
      expect(got.body.amount_refunded).toBe(800);
      expect(got.body.refunds.map((r: { amount: number; status: string }) => [r.amount, r.status])).toEqual([
        [300, 'succeeded'],
        [500, 'succeeded'],
      ]);
    });

    it('an order cannot be canceled while its payment is processing', async () => {
      const order = (await http().post('/orders').set(t.auth()).set('Idempotency-Key', randomUUID())
        .send({ currency: 'usd', items: [{ sku: 'a', quantity: 1, unit_amount: 700 }] }).expect(201)).body as { id: string };
      const key = randomUUID();
      const body = paymentBody({ amount: 700, order_id: order.id, description: `order ${key}` });
      await ledger.fault('hang', 1);
      await pay(key, body).expect(503);
      const refused = await http().post(`/orders/${order.id}/cancel`).set(t.auth()).set('Idempotency-Key', randomUUID()).expect(422);
      expect(refused.body.code).toBe('order_not_cancelable');
      await pay(key, body).expect(201);
      expect((await http().get(`/orders/${order.id}`).set(t.auth()).expect(200)).body.status).toBe('paid');
    });
  });
});
