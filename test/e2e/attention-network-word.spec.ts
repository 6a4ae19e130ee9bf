import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import request from 'supertest';
import { IdempotencyRecovery } from 'safe-retries';
import { DEFAULT_WEBHOOK_SECRET } from '../../src/config/config';
import { OperationAttention } from '../../src/payments/attention/operation-attention';
import { TestApp, countRows, createTestApp, metricsAuth } from '../support/app';
import { CardNetworkProcess, Ledger, NetworkEvent, networkAppEnv, startCardNetworkProcess } from '../support/card-network';
import { NOW_US } from '../support/db-clock';
import { createOrder, paymentBody } from '../support/fixtures';
import { keyIs } from '../support/keys';

/**
 * Money moves on an operator's word only with the card network's word about
 * the operation's own object. The network is a process of its own (no
 * webhooks, no recovery job: the suite runs the job, and delivers the
 * network's events itself, signed, to replay them).
 *
 * - A payment that charged but whose answer was lost, then refused by the
 *   network for a day, goes to a person; the operator's `fail` waits while
 *   the network cannot be asked (the order stays reserved, the hand-over says
 *   why); once it answers, the cancel of the intent says it succeeded, and the
 *   payment is recorded succeeded: one charge for the order.
 * - A refund's `fail` waits the same way, then applies on the network's list.
 * - `reask` gives the operation the whole stuck bound again.
 * - A released payment's intent is canceled at the network.
 * - A network event that contradicts a final record is surfaced (hand-over
 *   `contradicted`, metric, the client's event), never dropped.
 */
jest.setTimeout(120_000);

const signer = new Stripe('sk_test_signer_only');

describe("an operator's decision and the network's word (e2e)", () => {
  let network: CardNetworkProcess;
  let ledger: Ledger;
  let t: TestApp;
  const http = () => request(t.app.getHttpServer());
  const pay = (key: string, body: object) => http().post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body);
  const refund = (paymentId: string, key: string, body: object = {}) =>
    http().post(`/payments/${paymentId}/refunds`).set(t.auth()).set('Idempotency-Key', key).send(body);
  const paymentOf = async (id: string) =>
    (await http().get(`/payments/${id}`).set(t.auth()).expect(200)).body as {
      status: string;
      amount_refunded: number;
      refunds: { id: string; status: string; failure_reason: string | null }[];
    };
  const intentOf = async (paymentId: string) =>
    (await t.dataSource.query<{ network_charge_id: string }[]>('SELECT network_charge_id FROM payments WHERE id = $1', [paymentId]))[0].network_charge_id;
  /** The hold of an operation with a person has run out (the database's clock): the next attempt looks at it. */
  const holdRunsOut = (key: string) => t.dataSource.query(`UPDATE idempotency_keys SET lease = ${NOW_US} WHERE ${keyIs()} AND status IS NULL`, [key]);
  /** A day has passed since the record was made (the database's clock). */
  const aDayLater = (table: 'payments' | 'refunds', id: string) =>
    t.dataSource.query(`UPDATE ${table} SET created_at = created_at - interval '25 hours' WHERE id = $1`, [id]);
  const recover = () => t.app.get(IdempotencyRecovery).runOnce();
  const attention = () => t.app.get(OperationAttention);
  const openFor = async (recordId: string) => (await attention().listOpen(1000)).filter((r) => r.record_id === recordId);
  const deliver = (event: NetworkEvent) => {
    const payload = JSON.stringify(event);
    const signature = signer.webhooks.generateTestHeaderString({ payload, secret: DEFAULT_WEBHOOK_SECRET });
    return http().post('/webhooks/card-network').set('Content-Type', 'application/json').set('Stripe-Signature', signature).send(payload);
  };
  const eventsOf = async (id: string) =>
    (await t.dataSource.query<{ type: string }[]>(`SELECT type FROM events WHERE data->>'id' = $1 ORDER BY seq`, [id])).map((e) => e.type);
  const metric = async (name: string) =>
    (await http().get('/metrics').set(metricsAuth()).expect(200)).text.split('\n').filter((l) => l.startsWith(name));

  beforeAll(async () => {
    network = await startCardNetworkProcess({ env: { CARD_NETWORK_PROCESSING_DELAY: '300ms' } });
    ledger = network.ledger;
    t = await createTestApp({ env: networkAppEnv(network) });
  });
  afterAll(async () => {
    await t?.close();
    await network?.stop();
  });
  afterEach(() => ledger.clearFaults());

  it("a charge whose answer was lost, then a day of refusals: the operator's fail waits, then the network wins; one charge", async () => {
    const order = await createOrder(t);
    const body = paymentBody({ order_id: order.id, amount: order.amount_total, currency: order.currency, source: 'tok_chargeThenError' });
    const key = randomUUID();
    // The confirm charges at the network and answers 500: unknown, kept at its intent.
    expect((await pay(key, body).expect(503)).body.code).toBe('card_network_unavailable');
    const [{ id: paymentId }] = await t.dataSource.query<{ id: string }[]>('SELECT id FROM payments WHERE order_id = $1', [order.id]);
    expect(await ledger.charges({ key: 'payment_id', value: paymentId })).toHaveLength(1);

    // A day of refused calls (a revoked network secret): handed to a person.
    await aDayLater('payments', paymentId);
    await ledger.refuse(401, 1_000);
    const handed = await pay(key, body).expect(409);
    expect(handed.body).toMatchObject({ code: 'requires_attention', payment_id: paymentId });
    const attentionId = handed.body.attention_id as string;
    // The key's lookup says a person holds it: a retry will not resume it.
    expect((await http().get(`/idempotency-keys/${key}`).set(t.auth()).expect(200)).body).toMatchObject({
      state: 'in_progress',
      requires_attention: { attention_id: attentionId, object: 'payment', id: paymentId },
    });

    // The operator marks it failed; the network still refuses: nothing moves.
    await attention().decide(attentionId, 'fail', 'ops-test', 'the customer says the card was never charged');
    await holdRunsOut(key);
    expect(await recover()).toMatchObject({ taken: 1, finished: 0, released: 0 });
    expect((await paymentOf(paymentId)).status).toBe('requires_attention');
    const [waiting] = await openFor(paymentId);
    expect(waiting).toMatchObject({ id: attentionId, decision: 'fail', resolved_at: null, waiting: expect.stringMatching(/^fail waits for the card network, which could not be asked/) });
    // The order is still reserved: the client cannot pay it again with a new key.
    expect((await pay(randomUUID(), { ...body, source: 'tok_visa' }).expect(409)).body.code).toBe('order_payment_conflict');

    // The network answers again: the intent cannot be canceled, it succeeded; the network wins.
    await ledger.clearFaults();
    await holdRunsOut(key);
    expect(await recover()).toMatchObject({ taken: 1, finished: 1 });
    const replay = await pay(key, body).expect(201);
    expect(replay.body).toMatchObject({ id: paymentId, status: 'succeeded' });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(await attention().find(attentionId)).toMatchObject({ resolution: 'found_at_network', waiting: null });
    expect((await http().get(`/orders/${order.id}`).set(t.auth()).expect(200)).body.status).toBe('paid');
    expect((await pay(randomUUID(), { ...body, source: 'tok_visa' }).expect(422)).body.code).toBe('order_not_payable');
    expect(await ledger.charges({ key: 'order_id', value: order.id })).toHaveLength(1);
    expect(await eventsOf(paymentId)).toEqual(['payment.requires_attention', 'payment.succeeded']);
  });

  it("a refund's fail waits while the network cannot be asked, then applies on its list: the amount comes back once", async () => {
    const payment = (await pay(randomUUID(), paymentBody({ amount: 1000 })).expect(201)).body as { id: string };
    const key = randomUUID();
    // A refund whose only send was lost before the network saw it, then a day of refusals.
    await ledger.hold();
    await refund(payment.id, key).expect(503);
    await ledger.releaseLost();
    const [{ id: refundId }] = await t.dataSource.query<{ id: string }[]>('SELECT id FROM refunds WHERE payment_id = $1', [payment.id]);
    await aDayLater('refunds', refundId);
    await ledger.refuse(429, 1_000);
    const handed = await refund(payment.id, key).expect(409);
    const attentionId = handed.body.attention_id as string;

    await attention().decide(attentionId, 'fail', 'ops-test', 'never reached the network');
    await holdRunsOut(key);
    expect(await recover()).toMatchObject({ taken: 1, finished: 0, released: 0 });
    expect((await paymentOf(payment.id)).refunds).toEqual([expect.objectContaining({ id: refundId, status: 'requires_attention' })]);
    expect((await paymentOf(payment.id)).amount_refunded).toBe(1000);
    expect((await openFor(refundId))[0].waiting).toMatch(/could not be asked about refund/);

    await ledger.clearFaults();
    await holdRunsOut(key);
    expect(await recover()).toMatchObject({ taken: 1, finished: 1 });
    expect((await paymentOf(payment.id)).refunds).toEqual([expect.objectContaining({ id: refundId, status: 'failed', failure_reason: 'failed_by_operator' })]);
    expect((await paymentOf(payment.id)).amount_refunded).toBe(0);
    expect(await attention().find(attentionId)).toMatchObject({ resolution: 'failed' });
  });

  it('reask gives the payment the whole stuck bound again, not one attempt', async () => {
    const body = paymentBody({ description: `reask ${randomUUID()}` });
    const key = randomUUID();
    // The intent is created, its confirm refused (429): unknown, kept at `intent`.
    await ledger.refuse(429, 1, 1);
    await pay(key, body).expect(503);
    const [{ id: paymentId }] = await t.dataSource.query<{ id: string }[]>('SELECT id FROM payments WHERE description = $1', [body.description]);
    await aDayLater('payments', paymentId);
    await ledger.refuse(429, 1_000);
    const attentionId = (await pay(key, body).expect(409)).body.attention_id as string;

    await attention().decide(attentionId, 'reask', 'ops-test', null);
    await holdRunsOut(key);
    await recover();
    expect(await attention().find(attentionId)).toMatchObject({ resolution: 'reasked' });
    // Still refused: an unknown outcome to retry, not a new hand-over.
    expect((await pay(key, body).expect(503)).body.code).toBe('card_network_unavailable');
    expect((await paymentOf(paymentId)).status).toBe('processing');
    expect(await openFor(paymentId)).toEqual([]);

    await ledger.clearFaults();
    expect((await pay(key, body).expect(201)).body).toMatchObject({ id: paymentId, status: 'succeeded' });
    expect(await ledger.charges({ key: 'payment_id', value: paymentId })).toHaveLength(1);
  });

  it("a released payment's intent is canceled at the network: nothing is left to confirm", async () => {
    const body = paymentBody({ source: 'tok_processingError', description: `released ${randomUUID()}` });
    expect((await pay(randomUUID(), body).expect(502)).body.code).toBe('card_network_error');
    const intents = (await ledger.intents()).filter((i) => i.description === body.description);
    expect(intents.map((i) => i.status)).toEqual(['canceled']);
  });

  it('a charge for a payment held failed is surfaced, never dropped: hand-over, metric, client event; acknowledged by an operator', async () => {
    const made = (await pay(randomUUID(), paymentBody()).expect(201)).body as { id: string };
    const intent = await intentOf(made.id);
    // A record that says failed while the network charged (an operator's word taken without the network's).
    await t.dataSource.query(`UPDATE payments SET status = 'failed', failure_code = 'failed_by_operator' WHERE id = $1`, [made.id]);
    const [succeeded] = (await ledger.events('payment_intent.succeeded')).filter((e) => e.data.object.id === intent);

    const answer = await deliver(succeeded).expect(200);
    expect(answer.body).toEqual({ received: true, effect: 'contradicted' });
    const [open] = await openFor(made.id);
    expect(open).toMatchObject({ operation: 'payment', reason: 'contradicted', idempotency_key: expect.any(String) });
    expect(open.evidence).toBe(`held failed, but at the card network intent ${intent} is succeeded`);
    expect(await metric('card_network_contradictions_total{operation="payment"}')).toEqual([expect.stringMatching(/ 1$/)]);
    expect(await eventsOf(made.id)).toEqual(['payment.succeeded', 'payment.contradicted']);
    // The network delivers it again: no second hand-over, and the record never moves.
    expect((await deliver(succeeded).expect(200)).body.effect).toBe('duplicate');
    expect(await openFor(made.id)).toHaveLength(1);
    expect((await paymentOf(made.id)).status).toBe('failed');

    // A contradiction belongs to no operation: only an acknowledgement ends it, at once.
    expect(await attention().decide(open.id, 'fail', 'ops-test', 'no')).toBeUndefined();
    expect(await attention().decide(open.id, 'acknowledge', 'ops-test', 'refunded the charge at the network')).toMatchObject({ resolution: 'acknowledged' });
    expect(await openFor(made.id)).toEqual([]);
  });

  it('a refund the network made for one held failed is surfaced; an out-of-order failure of a succeeded payment is not', async () => {
    const made = (await pay(randomUUID(), paymentBody({ amount: 1000 })).expect(201)).body as { id: string };
    const refunded = (await refund(made.id, randomUUID(), { amount: 400 }).expect(201)).body as { id: string };
    const [{ network_refund_id: networkRefund }] = await t.dataSource.query<{ network_refund_id: string }[]>(
      'SELECT network_refund_id FROM refunds WHERE id = $1',
      [refunded.id],
    );
    await t.dataSource.query(`UPDATE refunds SET status = 'failed', failure_reason = 'failed_by_operator' WHERE id = $1`, [refunded.id]);
    const [event] = (await ledger.events()).filter((e) => e.data.object.id === networkRefund);
    expect((await deliver(event).expect(200)).body.effect).toBe('contradicted');
    expect(await openFor(refunded.id)).toEqual([expect.objectContaining({ operation: 'refund', reason: 'contradicted' })]);
    expect(await eventsOf(refunded.id)).toEqual(['refund.succeeded', 'refund.contradicted']);
    expect(await metric('card_network_contradictions_total{operation="refund"}')).toEqual([expect.stringMatching(/ 1$/)]);

    // A failure event for a payment held succeeded, which the network, asked, has as succeeded: nothing to surface.
    const intent = await intentOf(made.id);
    const [succeeded] = (await ledger.events('payment_intent.succeeded')).filter((e) => e.data.object.id === intent);
    const stale = { ...succeeded, id: `evt_stale_${randomUUID()}`, type: 'payment_intent.payment_failed' };
    stale.data = { object: { ...succeeded.data.object, status: 'requires_payment_method', last_payment_error: { code: 'card_declined' } } };
    expect((await deliver(stale).expect(200)).body.effect).toBe('nothing_to_do');
    expect(await openFor(made.id)).toEqual([]);
    expect(await countRows(t.dataSource, 'operation_attention', `reason = 'contradicted' AND record_id = $1`, [made.id])).toBe(0);
  });
});
