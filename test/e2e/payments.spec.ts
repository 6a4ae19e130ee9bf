import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { CLIENT_B, TestApp, countRows, createTestApp } from '../support/app';
import { createOrder, createPayment, paymentBody } from '../support/fixtures';
import { keyIs } from '../support/keys';

describe('payments (e2e)', () => {
  let t: TestApp;
  const http = () => request(t.app.getHttpServer());
  const pay = (body: object, key = randomUUID(), client?: { key: string }) =>
    http().post('/payments').set(t.auth(client)).set('Idempotency-Key', key).send(body);

  beforeAll(async () => {
    t = await createTestApp({ listen: true });
  });
  afterAll(() => t.close());

  it('charges once and replays the original 201 for a retry', async () => {
    const key = randomUUID();
    const first = await pay(paymentBody({ amount: 4200, currency: 'EUR', description: 'retry me' }), key).expect(201);
    expect(first.body).toMatchObject({ status: 'succeeded', amount: 4200, currency: 'eur', order_id: null, amount_refunded: 0, description: 'retry me' });
    expect(first.headers.location).toBe(`/payments/${first.body.id}`);
    const retry = await pay(paymentBody({ amount: 4200, currency: 'EUR', description: 'retry me' }), key).expect(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.text).toBe(first.text);
    expect(await countRows(t.dataSource, 'payments', 'id = $1', [first.body.id])).toBe(1);

    const reused = await pay(paymentBody({ amount: 4300, currency: 'EUR', description: 'retry me' }), key).expect(422);
    expect(reused.body.code).toBe('idempotency_key_reused');
  });

  it.each([
    ['zero amount', paymentBody({ amount: 0 }), 'amount'],
    ['negative amount', paymentBody({ amount: -5 }), 'amount'],
    ['fractional amount', paymentBody({ amount: 10.5 }), 'amount'],
    ['string amount', paymentBody({ amount: '1000' }), 'amount'],
    ['amount over the maximum', paymentBody({ amount: 100_000_000 }), 'amount'],
    ['missing currency', { amount: 100, source: 'tok_visa' }, 'currency'],
    ['unknown currency', paymentBody({ currency: 'xyz' }), 'currency'],
    ['unknown field', { ...paymentBody(), capture: true }, 'capture'],
    ['over-long description', paymentBody({ description: 'd'.repeat(501) }), 'description'],
    ['malformed order_id', paymentBody({ order_id: 'order-1' }), 'order_id'],
    ['unknown card token', paymentBody({ source: 'tok_unknown' }), 'source'],
  ])('refuses %s with 400 validation_failed; nothing is written and the key stays free', async (_n, body, field) => {
    const key = randomUUID();
    const before = await countRows(t.dataSource, 'payments');
    const res = await pay(body, key).expect(400);
    expect(res.body.code).toBe('validation_failed');
    expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    expect(await countRows(t.dataSource, 'payments')).toBe(before);
    expect(await countRows(t.dataSource, 'idempotency_keys', keyIs(), [key])).toBe(0);
  });

  it.each([
    ['tok_chargeDeclined', 'card_declined'],
    ['tok_chargeDeclinedInsufficientFunds', 'insufficient_funds'],
  ])('records a declined payment for %s and replays the 402', async (source, code) => {
    const key = randomUUID();
    const first = await pay(paymentBody({ source }), key).expect(402);
    expect(first.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(first.body.code).toBe(code);
    const failed = await http().get(`/payments/${first.body.payment_id}`).set(t.auth()).expect(200);
    expect(failed.body).toMatchObject({ status: 'failed', failure_code: code });
    const replay = await pay(paymentBody({ source }), key).expect(402);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(await countRows(t.dataSource, 'payments', 'failure_code = $1', [code])).toBe(1);
  });

  it('answers 502 for a processing error, records nothing and releases the key', async () => {
    const key = randomUUID();
    const before = await countRows(t.dataSource, 'payments');
    const res = await pay(paymentBody({ source: 'tok_processingError' }), key).expect(502);
    expect(res.body.code).toBe('card_network_error');
    expect(await countRows(t.dataSource, 'payments')).toBe(before);
    expect(await countRows(t.dataSource, 'idempotency_keys', keyIs(), [key])).toBe(0);
    // The same request runs again: the error was not stored and replayed.
    const again = await pay(paymentBody({ source: 'tok_processingError' }), key).expect(502);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    // And the key is free for the operation with a working card (a key still bound
    // to the first body would answer 422 idempotency_key_reused here).
    const paid = await pay(paymentBody({ source: 'tok_visa' }), key).expect(201);
    expect(paid.body.status).toBe('succeeded');
    expect(paid.headers['idempotent-replayed']).toBeUndefined();
  });

  it('pays an order: the payment and the order\'s move to paid commit together', async () => {
    const order = await createOrder(t);
    const res = await pay(paymentBody({ amount: order.amount_total, currency: 'usd', order_id: order.id })).expect(201);
    expect(res.body.order_id).toBe(order.id);
    expect((await http().get(`/orders/${order.id}`).set(t.auth()).expect(200)).body.status).toBe('paid');
    const second = await pay(paymentBody({ amount: order.amount_total, currency: 'usd', order_id: order.id })).expect(422);
    expect(second.body.code).toBe('order_not_payable');
    await http().post(`/orders/${order.id}/cancel`).set(t.auth()).set('Idempotency-Key', randomUUID()).expect(422);
  });

  it('refuses a payment whose amount or currency does not match the order (422 amount_mismatch, stored)', async () => {
    const order = await createOrder(t);
    const key = randomUUID();
    const wrong = await pay(paymentBody({ amount: order.amount_total + 1, order_id: order.id }), key).expect(422);
    expect(wrong.body.code).toBe('amount_mismatch');
    expect((await pay(paymentBody({ amount: order.amount_total + 1, order_id: order.id }), key).expect(422)).headers['idempotent-replayed']).toBe('true');
    expect((await pay(paymentBody({ amount: order.amount_total, currency: 'eur', order_id: order.id })).expect(422)).body.code).toBe('amount_mismatch');
    expect((await http().get(`/orders/${order.id}`).set(t.auth()).expect(200)).body.status).toBe('pending');
  });

  it("refuses to pay a canceled order or another client's order (422 order_not_payable)", async () => {
    const canceled = await createOrder(t);
    await http().post(`/orders/${canceled.id}/cancel`).set(t.auth()).set('Idempotency-Key', randomUUID()).expect(200);
    expect((await pay(paymentBody({ amount: canceled.amount_total, order_id: canceled.id })).expect(422)).body.code).toBe('order_not_payable');
    const theirs = await createOrder(t, undefined, CLIENT_B);
    expect((await pay(paymentBody({ amount: theirs.amount_total, order_id: theirs.id })).expect(422)).body.code).toBe('order_not_payable');
    expect(await countRows(t.dataSource, 'payments', 'order_id = $1', [theirs.id])).toBe(0);
  });

  it('lets exactly one of 20 concurrent payments of one order under 20 different keys succeed', async () => {
    const order = await createOrder(t);
    const results = await Promise.all(
      Array.from({ length: 20 }, () => request(t.url!).post('/payments').set(t.auth()).set('Idempotency-Key', randomUUID())
        .send(paymentBody({ amount: order.amount_total, order_id: order.id }))),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    // The others: 409 while the winner's charge is in progress (retry), 422 once the order is paid.
    expect(statuses.filter((s) => s !== 201).every((s) => s === 409 || s === 422)).toBe(true);
    expect(await countRows(t.dataSource, 'payments', "order_id = $1 AND status = 'succeeded'", [order.id])).toBe(1);
  });

  it('refunds what remains by default, and concurrent refunds under different keys never exceed the payment', async () => {
    const payment = await createPayment(t, paymentBody({ amount: 1000 }));
    const results = await Promise.all(
      Array.from({ length: 10 }, () => request(t.url!).post(`/payments/${payment.id}/refunds`).set(t.auth()).set('Idempotency-Key', randomUUID()).send({ amount: 300 })),
    );
    const ok = results.filter((r) => r.status === 201);
    expect(ok).toHaveLength(3);
    expect(results.filter((r) => r.status === 422).every((r) => r.body.code === 'refund_exceeds_payment')).toBe(true);
    expect(results.filter((r) => r.status !== 201 && r.status !== 422)).toHaveLength(0);

    const rest = await http().post(`/payments/${payment.id}/refunds`).set(t.auth()).set('Idempotency-Key', randomUUID()).send({}).expect(201);
    expect(rest.body.amount).toBe(100);
    const got = await http().get(`/payments/${payment.id}`).set(t.auth()).expect(200);
    expect(got.body.amount_refunded).toBe(1000);
    expect(got.body.refunds.map((r: { amount: number }) => r.amount).sort()).toEqual([100, 300, 300, 300]);
    expect((await http().post(`/payments/${payment.id}/refunds`).set(t.auth()).set('Idempotency-Key', randomUUID()).send({}).expect(422)).body.code).toBe('refund_exceeds_payment');
  });

  it('refuses to refund a failed payment (422 payment_not_refundable) and another client\'s payment (404)', async () => {
    const declined = await pay(paymentBody({ source: 'tok_chargeDeclined' })).expect(402);
    const res = await http().post(`/payments/${declined.body.payment_id}/refunds`).set(t.auth()).set('Idempotency-Key', randomUUID()).send({}).expect(422);
    expect(res.body.code).toBe('payment_not_refundable');
    const mine = await createPayment(t);
    await http().post(`/payments/${mine.id}/refunds`).set(t.auth(CLIENT_B)).set('Idempotency-Key', randomUUID()).send({}).expect(404);
    await http().get(`/payments/${mine.id}`).set(t.auth(CLIENT_B)).expect(404);
    expect((await http().get(`/payments/${mine.id}`).set(t.auth()).expect(200)).body.amount_refunded).toBe(0);
  });

  it('lists only the caller\'s payments with cursor pagination', async () => {
    const own = await createTestApp();
    try {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await createPayment(own)).id);
      await createPayment(own, paymentBody(), CLIENT_B);
      const p1 = await request(own.app.getHttpServer()).get('/payments?limit=2').set(own.auth()).expect(200);
      const p2 = await request(own.app.getHttpServer()).get(`/payments?limit=2&starting_after=${p1.body.next_cursor}`).set(own.auth()).expect(200);
      const p3 = await request(own.app.getHttpServer()).get(`/payments?limit=2&starting_after=${p2.body.next_cursor}`).set(own.auth()).expect(200);
      expect([...p1.body.data, ...p2.body.data, ...p3.body.data].map((p: { id: string }) => p.id)).toEqual([...ids].reverse());
      expect(p3.body.has_more).toBe(false);
      expect(p3.body.next_cursor).toBeNull();
    } finally {
      await own.close();
    }
  });
});
