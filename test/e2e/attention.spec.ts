import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import request from 'supertest';
import { IdempotencyRecovery } from 'safe-retries';
import { DEFAULT_CARD_NETWORK_SECRET } from '../../src/config/config';
import { OperationAttention } from '../../src/payments/attention/operation-attention';
import { RefundSettlementJob } from '../../src/payments/refunds/refund-settlement.job';
import { TestApp, countRows, createTestApp, metricsAuth } from '../support/app';
import { CardNetworkProcess, Ledger, networkAppEnv, startCardNetworkProcess } from '../support/card-network';
import { NOW_US } from '../support/db-clock';
import { REPO_ROOT, builtFile } from '../support/dist';
import { createOrder, paymentBody } from '../support/fixtures';
import { waitFor } from '../support/http-client';
import { keyIs } from '../support/keys';

/**
 * Nothing stays open for ever. The card network is a process of its own
 * (no webhooks, no recovery job: the suite runs the jobs itself).
 *
 * - A refund whose first send never reached the network, then refused by
 *   every resume (a dashboard refund took the rest of the payment), moves to
 *   requires_attention with its evidence, its amount still reserved: the
 *   recovery job passes it by without a word; an operator's `fail` (recorded,
 *   applied by the next attempt under the key) gives the amount back and the
 *   key answers 422 failed_by_operator; `reask` (the command line's) once the
 *   network takes the refund makes it once (201, replayed).
 * - A payment before its intent under a 400 that names no parameter ends
 *   (502, key free, order payable and cancelable), first send or resume.
 * - Past the stuck bound, a payment with no intent is released, a refund is
 *   handed to a person, and so is a payment with an intent: marked failed
 *   (the network, asked, never confirmed it), its order is payable again.
 * - Refunds converge without webhooks: a succeeded refund that fails later is
 *   recorded failed by the settlement job; 100 pending refunds the network
 *   does not know cannot keep a newer settled one from being asked.
 */
jest.setTimeout(120_000);

const run = promisify(execFile);

describe('stuck operations end or go to a person (e2e)', () => {
  let network: CardNetworkProcess;
  let ledger: Ledger;
  let t: TestApp;
  const http = () => request(t.app.getHttpServer());
  const pay = (key: string, body: object) => http().post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body);
  const refund = (paymentId: string, key: string, body: object = {}) =>
    http().post(`/payments/${paymentId}/refunds`).set(t.auth()).set('Idempotency-Key', key).send(body);
  const getPayment = async (id: string) =>
    (await http().get(`/payments/${id}`).set(t.auth()).expect(200)).body as { amount_refunded: number; refunds: { id: string; status: string; failure_reason: string | null }[] };
  const outcome = async (key: string) => (await http().get(`/idempotency-keys/${key}`).set(t.auth()).expect(200)).body as { state: string; status?: number };
  const intentOf = async (paymentId: string) =>
    (await t.dataSource.query<{ network_charge_id: string }[]>('SELECT network_charge_id FROM payments WHERE id = $1', [paymentId]))[0].network_charge_id;
  /** A refund made at the network by someone else (the dashboard): no metadata of ours. */
  const dashboardRefund = async (intent: string, amount: number) => {
    const res = await fetch(`${network.url}/v1/refunds`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${DEFAULT_CARD_NETWORK_SECRET}`, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ payment_intent: intent, amount: String(amount) }).toString(),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as { id: string };
  };
  /** The hold of an operation with a person has run out (the database's clock): the next attempt looks at it. */
  const holdRunsOut = (key: string) => t.dataSource.query(`UPDATE idempotency_keys SET lease = ${NOW_US} WHERE ${keyIs()} AND status IS NULL`, [key]);
  const recover = () => t.app.get(IdempotencyRecovery).runOnce();
  /** `npm run attention -- …`, from dist/, against this suite's database. */
  const cli = (args: string[]) =>
    run(process.execPath, [builtFile('src/cli/attention.js'), ...args], {
      env: { ...process.env, LOG_LEVEL: 'warn', DATABASE_URL: t.db.url },
      cwd: REPO_ROOT,
      timeout: 60_000,
    });
  const attention = () => t.app.get(OperationAttention);

  async function paid(source = 'tok_visa', amount = 1000): Promise<{ id: string; intent: string }> {
    const made = await pay(randomUUID(), paymentBody({ source, amount, description: `attention ${randomUUID()}` })).expect(201);
    return { id: made.body.id as string, intent: await intentOf(made.body.id as string) };
  }

  /** A refund of the whole payment whose only send is lost before it reaches the network (503), then the dashboard refunds `taken`. */
  async function refundLostThenTaken(payment: { id: string; intent: string }, taken: number): Promise<{ key: string; refundId: string }> {
    const key = randomUUID();
    await ledger.hold();
    const lost = await refund(payment.id, key).expect(503);
    expect(lost.body.code).toBe('card_network_unavailable');
    await ledger.releaseLost();
    expect(await ledger.refunds(payment.intent)).toEqual([]);
    await dashboardRefund(payment.intent, taken);
    const [{ id }] = await t.dataSource.query<{ id: string }[]>('SELECT id FROM refunds WHERE payment_id = $1', [payment.id]);
    return { key, refundId: id };
  }

  async function metric(name: string): Promise<string[]> {
    const text = (await http().get('/metrics').set(metricsAuth()).expect(200)).text;
    return text.split('\n').filter((l) => l.startsWith(name));
  }

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

  it('a refund refused after its lost first send requires attention; marked failed, its amount comes back and the key answers so', async () => {
    const payment = await paid();
    const { key, refundId } = await refundLostThenTaken(payment, 100);

    // The resume: the network lists none of ours and refuses this refund as it stands.
    const handed = await refund(payment.id, key).expect(409);
    expect(handed.body).toMatchObject({ code: 'requires_attention', refund_id: refundId });
    const attentionId = handed.body.attention_id as string;
    expect((await getPayment(payment.id)).refunds).toEqual([expect.objectContaining({ id: refundId, status: 'requires_attention' })]);
    expect((await getPayment(payment.id)).amount_refunded).toBe(1000);
    expect(await outcome(key)).toMatchObject({ state: 'in_progress' });
    const [listed] = (await attention().listOpen(100)).filter((r) => r.id === attentionId);
    expect(listed).toMatchObject({ operation: 'refund', record_id: refundId, reason: 'refused', decision: null, resolved_at: null });
    expect(listed.evidence).toMatch(/refused.*lists no refund of ours/);
    expect(await metric('operations_requiring_attention_total{operation="refund",reason="refused"}')).toEqual([expect.stringMatching(/ 1$/)]);
    expect(await metric('operations_requiring_attention{operation="refund"}')).toEqual([expect.stringMatching(/ 1$/)]);

    // While held, a retry is told the key is in progress; after the hold, with no
    // decision, the recovery job looks, asks the network nothing and holds it again.
    expect((await refund(payment.id, key).expect(409)).body.code).not.toBe('requires_attention');
    const refundCalls = (await ledger.refunds(payment.intent)).length;
    for (let i = 0; i < 3; i++) {
      await holdRunsOut(key);
      // Held again: neither finished nor released, and (held, not failed) no log line.
      expect(await recover()).toMatchObject({ taken: 1, finished: 0, released: 0 });
    }
    expect((await ledger.refunds(payment.intent)).length).toBe(refundCalls);
    await holdRunsOut(key);
    expect((await refund(payment.id, key).expect(409)).body).toMatchObject({ code: 'requires_attention', attention_id: attentionId });

    // The operator marks it failed; a second decision changes nothing.
    const decided = await attention().decide(attentionId, 'fail', 'ops-test', 'dashboard refund took the rest; ours never reached the network');
    expect(decided).toMatchObject({ decision: 'fail', decided_by: 'ops-test' });
    expect(await attention().decide(attentionId, 'reask', 'someone-else', null)).toBeUndefined();
    await holdRunsOut(key);
    expect(await recover()).toMatchObject({ taken: 1, finished: 1 });

    const got = await getPayment(payment.id);
    expect(got.refunds).toEqual([expect.objectContaining({ id: refundId, status: 'failed', failure_reason: 'failed_by_operator' })]);
    expect(got.amount_refunded).toBe(0);
    const replay = await refund(payment.id, key).expect(422);
    expect(replay.body).toMatchObject({ code: 'failed_by_operator', refund_id: refundId });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(await outcome(key)).toMatchObject({ state: 'completed', status: 422 });
    expect(await attention().find(attentionId)).toMatchObject({ resolution: 'failed', decision_reason: expect.stringContaining('dashboard') });
    expect(await metric('operations_requiring_attention{operation="refund"}')).toEqual([expect.stringMatching(/ 0$/)]);
    // What is left at the network (900) is refundable.
    expect((await refund(payment.id, randomUUID(), { amount: 900 }).expect(201)).body.status).toBe('succeeded');
  });

  it('reask, recorded by the command line, makes the refund once once the network takes it, and the key answers 201', async () => {
    const payment = await paid();
    const key = randomUUID();
    await ledger.hold();
    await refund(payment.id, key).expect(503);
    await ledger.releaseLost();
    // The resume's lookup passes, its create is refused as it stands (400).
    await ledger.refuse(400, 1, 1);
    const handed = await refund(payment.id, key).expect(409);
    const attentionId = handed.body.attention_id as string;
    const refundId = handed.body.refund_id as string;

    const listed = await cli(['list']);
    expect(listed.stdout).toContain(`${attentionId} refund ${refundId}`);
    expect(listed.stdout).toMatch(/\(refused\): .*lists no refund of ours/);
    await expect(cli(['resolve', attentionId, 'fail'])).rejects.toMatchObject({ stderr: expect.stringContaining('--reason') });
    await expect(cli(['resolve', attentionId, 'acknowledge', '--reason', 'seen'])).rejects.toMatchObject({
      stderr: expect.stringContaining('acknowledge is for contradictions; use fail or reask'),
    });
    const resolved = await cli(['resolve', attentionId, 'reask', '--by', 'ops-test']);
    expect(resolved.stdout).toMatch(/^recorded: reask by ops-test/);
    await expect(cli(['resolve', attentionId, 'fail', '--reason', 'late'])).rejects.toMatchObject({ stderr: expect.stringContaining('already decided (reask by ops-test)') });

    await holdRunsOut(key);
    expect(await recover()).toMatchObject({ taken: 1, finished: 1 });
    const made = await refund(payment.id, key).expect(201);
    expect(made.body).toMatchObject({ id: refundId, amount: 1000, status: 'succeeded' });
    expect(made.headers['idempotent-replayed']).toBe('true');
    expect((await ledger.refunds(payment.intent)).map((r) => [r.metadata.refund_id, r.amount])).toEqual([[refundId, 1000]]);
    expect(await attention().find(attentionId)).toMatchObject({ decision: 'reask', decided_by: 'ops-test', resolution: 'reasked' });
    expect((await cli(['list'])).stdout).not.toContain(attentionId);
  }, 240_000);

  it('a payment before its intent under a 400 naming no parameter ends: 502, key free, order payable and cancelable', async () => {
    const order = await createOrder(t);
    const body = paymentBody({ order_id: order.id, amount: order.amount_total, currency: order.currency });
    await ledger.refuse(400);
    const refused = await pay(randomUUID(), body).expect(502);
    expect(refused.body.code).toBe('card_network_error');
    expect(await countRows(t.dataSource, 'payments', 'order_id = $1', [order.id])).toBe(0);

    // A lost first send, then every resume refused: ends the same way on the resume.
    const key = randomUUID();
    await ledger.hold();
    await pay(key, body).expect(503);
    await ledger.releaseLost();
    expect(await http().post(`/orders/${order.id}/cancel`).set(t.auth()).set('Idempotency-Key', randomUUID()).send().then((r) => r.status)).toBe(422);
    await ledger.refuse(400, 5);
    expect((await pay(key, body).expect(502)).body.code).toBe('card_network_error');
    expect(await outcome(key)).toEqual({ key, state: 'unknown' });
    expect(await countRows(t.dataSource, 'payments', 'order_id = $1', [order.id])).toBe(0);
    expect(await metric('operations_stuck_released_total{operation="payment",reason="refused"}')).toEqual([expect.stringMatching(/ 2$/)]);
    await ledger.clearFaults();
    await http().post(`/orders/${order.id}/cancel`).set(t.auth()).set('Idempotency-Key', randomUUID()).send().expect(200);
  });

  it('past the stuck bound: a payment with no intent is released, a refund goes to a person', async () => {
    const order = await createOrder(t);
    const payKey = randomUUID();
    await ledger.hold();
    await pay(payKey, paymentBody({ order_id: order.id, amount: order.amount_total, currency: order.currency })).expect(503);
    await ledger.releaseLost();
    const payment = await paid();
    const refundKey = randomUUID();
    await ledger.hold();
    await refund(payment.id, refundKey).expect(503);
    await ledger.releaseLost();

    // A day later (the records aged on the database's clock), the network still answers nothing definite.
    await t.dataSource.query(`UPDATE payments SET created_at = created_at - interval '25 hours' WHERE order_id = $1`, [order.id]);
    await t.dataSource.query(`UPDATE refunds SET created_at = created_at - interval '25 hours' WHERE payment_id = $1`, [payment.id]);
    // Every call until cleared: the settlement job, on its own timer, may ask the network meanwhile too.
    await ledger.fault('saved_error', 1_000);
    await holdRunsOut(payKey);
    await holdRunsOut(refundKey);
    expect(await recover()).toMatchObject({ taken: 2, released: 1 });
    await ledger.clearFaults();

    expect(await countRows(t.dataSource, 'payments', 'order_id = $1', [order.id])).toBe(0);
    expect(await outcome(payKey)).toMatchObject({ state: 'unknown' });
    const [refunded] = (await getPayment(payment.id)).refunds;
    expect(refunded.status).toBe('requires_attention');
    const open = (await attention().listOpen(100)).filter((r) => r.record_id === refunded.id);
    expect(open).toEqual([expect.objectContaining({ reason: 'stuck', evidence: expect.stringMatching(/still unknown 24 h/) })]);
  });

  it('a payment with an intent stuck past the bound goes to a person; marked failed (its intent canceled at the network), its order is payable again', async () => {
    const order = await createOrder(t);
    const body = paymentBody({ order_id: order.id, amount: order.amount_total, currency: order.currency });
    const key = randomUUID();
    // The intent is created, its confirm refused (429): unknown, kept at `intent`, nothing charged.
    await ledger.refuse(429, 1, 1);
    expect((await pay(key, body).expect(503)).body.code).toBe('card_network_unavailable');
    const [{ id: paymentId }] = await t.dataSource.query<{ id: string }[]>('SELECT id FROM payments WHERE order_id = $1', [order.id]);

    // A day later the network still refuses (429) every call: handed to a person, the order still reserved.
    await t.dataSource.query(`UPDATE payments SET created_at = created_at - interval '25 hours' WHERE id = $1`, [paymentId]);
    await ledger.refuse(429, 5);
    const handed = await pay(key, body).expect(409);
    expect(handed.body).toMatchObject({ code: 'requires_attention', payment_id: paymentId });
    await ledger.clearFaults();
    expect((await http().get(`/payments/${paymentId}`).set(t.auth()).expect(200)).body.status).toBe('requires_attention');
    expect((await pay(randomUUID(), body).expect(409)).body.code).toBe('order_payment_conflict');
    expect(await attention().find(handed.body.attention_id as string)).toMatchObject({ operation: 'payment', reason: 'stuck' });

    await attention().decide(handed.body.attention_id as string, 'fail', 'ops-test', 'customer paid another way');
    await holdRunsOut(key);
    expect(await recover()).toMatchObject({ taken: 1, finished: 1 });
    const replay = await pay(key, body).expect(422);
    expect(replay.body).toMatchObject({ code: 'failed_by_operator', payment_id: paymentId });
    expect((await http().get(`/payments/${paymentId}`).set(t.auth()).expect(200)).body).toMatchObject({ status: 'failed', failure_code: 'failed_by_operator' });
    expect(await attention().find(handed.body.attention_id as string)).toMatchObject({ resolution: 'failed' });
    expect(await ledger.charges({ key: 'payment_id', value: paymentId })).toEqual([]);
    // The network's word first: the intent is canceled, so nobody can confirm it later.
    expect((await ledger.intents()).filter((i) => i.metadata.payment_id === paymentId).map((i) => i.status)).toEqual(['canceled']);
    // Each state it kept has its event, written with it: the request's hand-over, the recovery job's failure.
    const events = await t.dataSource.query<{ type: string }[]>(`SELECT type FROM events WHERE data->>'id' = $1 ORDER BY seq`, [paymentId]);
    expect(events.map((e) => e.type)).toEqual(['payment.requires_attention', 'payment.failed']);
    expect((await pay(randomUUID(), body).expect(201)).body.status).toBe('succeeded');
  });

  it('refunds converge without webhooks: a succeeded refund that fails later is recorded failed; unknown pending ones starve nothing', async () => {
    const job = t.app.get(RefundSettlementJob);
    const late = await paid('tok_refundFail');
    const made = await refund(late.id, randomUUID(), { amount: 300 }).expect(201);
    expect(made.body.status).toBe('succeeded');
    await waitFor('the network to fail the refund', async () => (await ledger.refunds(late.intent))[0].status === 'failed');

    // 100 older pending refunds the network does not know, then a newer one it has settled.
    const settled = await paid('tok_refundPending');
    const pending = await refund(settled.id, randomUUID(), { amount: 200 }).expect(201);
    expect(pending.body.status).toBe('pending');
    const filler = await paid();
    await t.dataSource.query(
      `INSERT INTO refunds (client_id, payment_id, amount, status, network_refund_id, created_at)
       SELECT client_id, id, 1, 'pending', 're_unknown_' || g, now() - interval '1 hour' FROM payments, generate_series(1, 100) g WHERE id = $1`,
      [filler.id],
    );
    await waitFor('the network to settle the pending refund', async () => (await ledger.refunds(settled.intent))[0].status === 'succeeded');

    for (let run = 0; run < 3; run++) await job.runOnce();
    expect((await getPayment(late.id)).refunds).toEqual([expect.objectContaining({ id: made.body.id, status: 'failed', failure_reason: 'declined' })]);
    expect((await getPayment(late.id)).amount_refunded).toBe(0);
    expect((await getPayment(settled.id)).refunds).toEqual([expect.objectContaining({ id: pending.body.id, status: 'succeeded' })]);
    await t.dataSource.query(`DELETE FROM refunds WHERE network_refund_id LIKE 're_unknown_%'`);
  });
});
