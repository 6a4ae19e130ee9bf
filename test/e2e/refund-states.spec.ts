import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import request from 'supertest';
import { DEFAULT_WEBHOOK_SECRET } from '../../src/config/config';
import { RefundSettlementJob } from '../../src/payments/refunds/refund-settlement.job';
import { TestApp, countRows, createTestApp } from '../support/app';
import { CardNetworkProcess, Ledger, NetworkEvent, startCardNetworkProcess, networkAppEnv } from '../support/card-network';
import { paymentBody } from '../support/fixtures';
import { waitFor } from '../support/http-client';

/**
 * Refunds carry the card network's states, and only the network's word about
 * a refund moves it. The network is a process of its own that delivers no
 * webhooks: the suite fetches its events and delivers them itself, signed
 * with the real secret, in the order it chooses. Recovery is off: the
 * settlement job runs only when the suite runs it. After each case the ledger
 * is reconciled: the network's refunds of the payment (ids, amounts,
 * statuses) are ours, and amount_refunded is the sum of our refunds that did
 * not fail.
 *
 * - A refund the network answers pending is a 201 pending (replayed as it
 *   was); its refund.updated moves it to succeeded, once.
 * - A pending refund that fails later is recorded failed by the settlement
 *   job alone, its amount given back: a new refund of that amount is accepted
 *   by the network; the late refund.failed event changes nothing.
 * - A refund answered succeeded that fails later is moved to failed by its
 *   refund.failed event, its amount given back.
 * - A signed event about another refund (another payment's, or another
 *   refund id), rewritten to name ours, or a failure the network does not
 *   confirm, changes nothing.
 * - A payment_intent.requires_action event settles nothing: the payment
 *   stays processing until its payment_intent.succeeded.
 * - A real card token (tok_1…) pays once; paid with again under a new key,
 *   the network refuses it (400 on `source`, key released), nothing charged twice.
 */
jest.setTimeout(120_000);

const WEBHOOK_PATH = '/webhooks/card-network';
const PROCESSING_DELAY_MS = 300;
const signer = new Stripe('sk_test_signer_only');

/** The types of the events recorded about a resource, oldest first. */
async function eventTypes(t: TestApp, id: string): Promise<string[]> {
  return (await t.dataSource.query<{ type: string }[]>(`SELECT type FROM events WHERE data->>'id' = $1 ORDER BY seq`, [id])).map((r) => r.type);
}

function sign(payload: string): string {
  return signer.webhooks.generateTestHeaderString({ payload, secret: DEFAULT_WEBHOOK_SECRET });
}

interface RefundView {
  id: string;
  payment_id: string;
  amount: number;
  status: string;
  failure_reason: string | null;
  created_at: string;
}

interface PaymentView {
  id: string;
  status: string;
  amount: number;
  amount_refunded: number;
  refunds: RefundView[];
}

interface RefundRecord {
  id: string;
  client_id: string;
  network_refund_id: string | null;
  amount: string;
  status: string;
  failure_reason: string | null;
}

describe('refunds in the card network states (e2e)', () => {
  let network: CardNetworkProcess;
  let ledger: Ledger;
  let t: TestApp;
  const http = () => request(t.app.getHttpServer());
  const pay = (key: string, body: object) => http().post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body);
  const refund = (paymentId: string, key: string, body: object = {}) =>
    http().post(`/payments/${paymentId}/refunds`).set(t.auth()).set('Idempotency-Key', key).send(body);
  const getPayment = async (id: string) => (await http().get(`/payments/${id}`).set(t.auth()).expect(200)).body as PaymentView;
  /** Delivers an event (as the network would, signed with the real secret): its receipt. */
  const deliver = async (event: object) => {
    const payload = JSON.stringify(event);
    const answer = await http().post(WEBHOOK_PATH).set('Content-Type', 'application/json').set('Stripe-Signature', sign(payload)).send(payload).expect(200);
    return answer.body as { received: boolean; effect: string };
  };
  const processedEvents = (id: string) => countRows(t.dataSource, 'idempotency_messages', 'source = $1 AND message_id = $2', ['card-network', id]);

  const intentOf = async (paymentId: string) =>
    (await t.dataSource.query<{ network_charge_id: string }[]>('SELECT network_charge_id FROM payments WHERE id = $1', [paymentId]))[0].network_charge_id;
  const refundRecord = async (id: string) =>
    (
      await t.dataSource.query<RefundRecord[]>('SELECT id, client_id, network_refund_id, amount, status, failure_reason FROM refunds WHERE id = $1', [
        id,
      ])
    )[0];

  /** The network's refund of ours, once it has one, in the state `status`. */
  const networkRefundIn = (networkRefundId: string, status: string) =>
    waitFor(`the network's refund ${networkRefundId} to be ${status}`, async () => {
      const theirs = await ledger.refund(networkRefundId);
      return theirs.status === status && theirs;
    });

  /** The network's event of `type` about its refund `networkRefundId`. */
  const eventAbout = (type: string, networkRefundId: string) =>
    waitFor(`${type} of ${networkRefundId}`, async () => (await ledger.events(type)).find((e) => e.data.object.id === networkRefundId));

  /** A paid payment (201 succeeded) with `source`. */
  async function paid(source: string, amount = 1000): Promise<{ id: string; intent: string }> {
    const made = await pay(randomUUID(), paymentBody({ source, amount, description: `refund states ${source} ${randomUUID()}` })).expect(201);
    expect(made.body.status).toBe('succeeded');
    return { id: made.body.id as string, intent: await intentOf(made.body.id as string) };
  }

  /**
   * The ledger, reconciled for one payment: the network's refunds of its intent
   * are ours (network id, amount, status, our refund id in their metadata), and
   * amount_refunded is the sum of our refunds that did not fail.
   */
  async function reconcile(paymentId: string): Promise<void> {
    const intent = await intentOf(paymentId);
    const ours = await t.dataSource.query<{ id: string; network_refund_id: string | null; amount: string; status: string }[]>(
      'SELECT id, network_refund_id, amount, status FROM refunds WHERE payment_id = $1',
      [paymentId],
    );
    const theirs = await ledger.refunds(intent);
    const byId = (a: unknown[], b: unknown[]) => String(a[0]).localeCompare(String(b[0]));
    expect(ours.map((r) => [r.network_refund_id, Number(r.amount), r.status, r.id]).sort(byId)).toEqual(
      theirs.map((r) => [r.id, r.amount, r.status, r.metadata.refund_id]).sort(byId),
    );
    const got = await getPayment(paymentId);
    const notFailed = ours.filter((r) => r.status !== 'failed').reduce((sum, r) => sum + Number(r.amount), 0);
    expect(got.amount_refunded).toBe(notFailed);
    expect(got.refunds.map((r) => [r.id, r.amount, r.status]).sort(byId)).toEqual(ours.map((r) => [r.id, Number(r.amount), r.status]).sort(byId));
  }

  beforeAll(async () => {
    // No CARD_NETWORK_WEBHOOK_URL: the network delivers nothing, the suite delivers its events.
    network = await startCardNetworkProcess({ env: { CARD_NETWORK_PROCESSING_DELAY: `${PROCESSING_DELAY_MS}ms` } });
    ledger = network.ledger;
    t = await createTestApp({
      env: networkAppEnv(network),
    });
  });
  afterAll(async () => {
    await t?.close();
    await network?.stop();
  });

  it('a pending refund is a 201 pending, replayed as it was; its refund.updated moves it to succeeded once', async () => {
    const payment = await paid('tok_refundPending');
    const key = randomUUID();
    const made = await refund(payment.id, key, { amount: 300 }).expect(201);
    expect(made.body).toMatchObject({ payment_id: payment.id, amount: 300, status: 'pending', failure_reason: null });
    expect(made.headers.location).toBe(`/payments/${payment.id}`);
    let got = await getPayment(payment.id);
    expect(got.amount_refunded).toBe(300);
    expect(got.refunds).toEqual([made.body]);

    const replay = await refund(payment.id, key, { amount: 300 }).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(made.text);

    const { network_refund_id: networkId } = await refundRecord(made.body.id as string);
    expect(networkId).toMatch(/^re_/);
    await networkRefundIn(networkId!, 'succeeded');
    const updated = await eventAbout('refund.updated', networkId!);
    expect(await deliver(updated)).toEqual({ received: true, effect: 'settled' });
    // Its events, each written with its change: the request's, then the webhook's.
    expect(await eventTypes(t, made.body.id as string)).toEqual(['refund.pending', 'refund.succeeded']);
    got = await getPayment(payment.id);
    expect(got.refunds).toEqual([{ ...made.body, status: 'succeeded' }]);
    expect(got.amount_refunded).toBe(300);
    expect(await processedEvents(updated.id)).toBe(1);

    // Delivered again: no second effect. The refund is already where the event
    // says, so the app answers before claiming the id (nothing_to_do, not duplicate).
    expect(await deliver(updated)).toEqual({ received: true, effect: 'nothing_to_do' });
    expect((await refundRecord(made.body.id as string)).status).toBe('succeeded');
    expect(await processedEvents(updated.id)).toBe(1);
    expect(await eventTypes(t, made.body.id as string)).toEqual(['refund.pending', 'refund.succeeded']);
    await reconcile(payment.id);
  });

  it('a pending refund that fails later is recorded failed by the settlement job, its amount given back; the late refund.failed changes nothing', async () => {
    const payment = await paid('tok_refundPendingFail');
    const before = (await getPayment(payment.id)).amount_refunded;
    expect(before).toBe(0);
    const made = await refund(payment.id, randomUUID(), { amount: 400 }).expect(201);
    expect(made.body).toMatchObject({ amount: 400, status: 'pending' });
    expect((await getPayment(payment.id)).amount_refunded).toBe(400);
    const { network_refund_id: networkId } = await refundRecord(made.body.id as string);

    await networkRefundIn(networkId!, 'failed');
    const job = t.app.get(RefundSettlementJob);
    // The job also asks about the succeeded refunds of the other cases (they may still fail): only this one moves.
    expect(await job.runOnce()).toMatchObject({ settled: 1, failed: 0 });
    // The settlement job writes the refund's event with its change.
    expect(await eventTypes(t, made.body.id as string)).toEqual(['refund.pending', 'refund.failed']);
    let got = await getPayment(payment.id);
    expect(got.refunds).toEqual([{ ...made.body, status: 'failed', failure_reason: 'declined' }]);
    expect(got.amount_refunded).toBe(before);
    expect(await job.runOnce()).toMatchObject({ settled: 0, failed: 0 });

    // Refundable again, here and at the network: the same amount under a new key.
    const again = await refund(payment.id, randomUUID(), { amount: 400 }).expect(201);
    expect(again.body).toMatchObject({ amount: 400, status: 'pending' });
    const { network_refund_id: againId } = await refundRecord(again.body.id as string);
    expect(againId).not.toBe(networkId);
    expect((await ledger.refunds(payment.intent)).map((r) => [r.id, r.amount])).toEqual([
      [againId, 400],
      [networkId, 400],
    ]);
    expect((await getPayment(payment.id)).amount_refunded).toBe(400);

    // The first refund's late events: it is already failed, nothing moves.
    const failed = await eventAbout('refund.failed', networkId!);
    expect(await deliver(failed)).toEqual({ received: true, effect: 'nothing_to_do' });
    const updated = await eventAbout('refund.updated', networkId!);
    expect(await deliver(updated)).toEqual({ received: true, effect: 'nothing_to_do' });
    expect(await refundRecord(made.body.id as string)).toMatchObject({ status: 'failed', failure_reason: 'declined' });
    expect((await getPayment(payment.id)).amount_refunded).toBe(400);

    // The second one fails too (this card's refunds all do): settled by the job as well.
    await networkRefundIn(againId!, 'failed');
    expect(await job.runOnce()).toMatchObject({ settled: 1, failed: 0 });
    got = await getPayment(payment.id);
    expect(got.refunds.map((r) => [r.id, r.status, r.failure_reason])).toEqual([
      [made.body.id, 'failed', 'declined'],
      [again.body.id, 'failed', 'declined'],
    ]);
    expect(got.amount_refunded).toBe(0);
    await reconcile(payment.id);
  });

  it('a refund answered succeeded that fails later is moved to failed by its refund.failed event, its amount given back', async () => {
    const payment = await paid('tok_refundFail');
    const made = await refund(payment.id, randomUUID()).expect(201);
    expect(made.body).toMatchObject({ amount: 1000, status: 'succeeded', failure_reason: null });
    expect((await getPayment(payment.id)).amount_refunded).toBe(1000);
    const { network_refund_id: networkId } = await refundRecord(made.body.id as string);

    await networkRefundIn(networkId!, 'failed');
    const failed = await eventAbout('refund.failed', networkId!);
    expect(await deliver(failed)).toEqual({ received: true, effect: 'settled' });
    const got = await getPayment(payment.id);
    expect(got.refunds).toEqual([{ ...made.body, status: 'failed', failure_reason: 'declined' }]);
    expect(got.amount_refunded).toBe(0);
    expect(await processedEvents(failed.id)).toBe(1);

    // Its refund.updated (emitted first, delivered last) says the same: nothing to do.
    const updated = await eventAbout('refund.updated', networkId!);
    expect(await deliver(updated)).toEqual({ received: true, effect: 'nothing_to_do' });
    expect((await getPayment(payment.id)).amount_refunded).toBe(0);
    await reconcile(payment.id);
  });

  it('a signed event about another refund, rewritten to name ours, changes nothing', async () => {
    // Ours: a refund the network answered pending.
    const ours = await paid('tok_refundPending');
    const key = randomUUID();
    const made = await refund(ours.id, key, { amount: 600 }).expect(201);
    expect(made.body.status).toBe('pending');
    const record = await refundRecord(made.body.id as string);
    const ourNetworkId = record.network_refund_id!;
    /** Our refund unchanged: still pending, 600 refunded, and the retry of its key replays the 201. */
    const unchanged = async () => {
      expect(await refundRecord(made.body.id as string)).toEqual(record);
      expect((await getPayment(ours.id)).amount_refunded).toBe(600);
      const replay = await refund(ours.id, key, { amount: 600 }).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(made.text);
      expect((await ledger.refunds(ours.intent)).map((r) => r.id)).toEqual([ourNetworkId]);
    };

    // Another payment's refund, which fails at the network: its real refund.updated and refund.failed.
    const other = await paid('tok_refundFail');
    const otherRefund = await refund(other.id, randomUUID(), { amount: 500 }).expect(201);
    const otherNetworkId = (await refundRecord(otherRefund.body.id as string)).network_refund_id!;
    await networkRefundIn(otherNetworkId, 'failed');
    const otherFailed = await eventAbout('refund.failed', otherNetworkId);
    const otherUpdated = await eventAbout('refund.updated', otherNetworkId);

    const namingOurs = (event: NetworkEvent, object: Record<string, unknown> = {}): NetworkEvent => {
      const forged = structuredClone(event);
      forged.data.object = {
        ...forged.data.object,
        ...object,
        metadata: { ...forged.data.object.metadata, refund_id: made.body.id as string, payment_id: ours.id, client_id: record.client_id },
      };
      return forged;
    };

    // 1. Another payment's refund.failed, its metadata naming our refund (the event's intent is the other payment's).
    expect(await deliver(namingOurs(otherFailed))).toEqual({ received: true, effect: 'nothing_to_do' });
    await unchanged();
    // 2. The same, its payment_intent rewritten to ours too: the refund id is not ours.
    expect(await deliver(namingOurs(otherFailed, { payment_intent: ours.intent }))).toEqual({ received: true, effect: 'nothing_to_do' });
    await unchanged();
    // 3. A refund.updated naming our refund and our intent, saying succeeded, with another refund id.
    const otherSucceeded = namingOurs(otherUpdated, { payment_intent: ours.intent, status: 'succeeded' });
    delete otherSucceeded.data.object.failure_reason;
    expect(await deliver(otherSucceeded)).toEqual({ received: true, effect: 'nothing_to_do' });
    await unchanged();
    // None of the forged deliveries claimed the real event's id: it still settles the other payment's refund.
    expect(await processedEvents(otherFailed.id)).toBe(0);
    expect(await deliver(otherFailed)).toEqual({ received: true, effect: 'settled' });
    expect((await refundRecord(otherRefund.body.id as string)).status).toBe('failed');

    // Ours settles by its own event.
    await networkRefundIn(ourNetworkId, 'succeeded');
    expect(await deliver(await eventAbout('refund.updated', ourNetworkId))).toEqual({ received: true, effect: 'settled' });
    const settled = await refundRecord(made.body.id as string);
    expect(settled.status).toBe('succeeded');

    // 4. A failure with every id ours (our refund, intent and network refund id):
    //    the network, asked, says succeeded, so nothing moves.
    const forgedFailure = namingOurs(otherFailed, { id: ourNetworkId, payment_intent: ours.intent, amount: 600 });
    forgedFailure.id = `evt_forged_${randomUUID().replace(/-/g, '')}`;
    expect(await deliver(forgedFailure)).toEqual({ received: true, effect: 'nothing_to_do' });
    expect(await refundRecord(made.body.id as string)).toEqual(settled);
    expect((await getPayment(ours.id)).amount_refunded).toBe(600);

    await reconcile(ours.id);
    await reconcile(other.id);
  });

  it('a payment_intent.requires_action settles nothing: the payment stays processing until its payment_intent.succeeded', async () => {
    const key = randomUUID();
    const body = paymentBody({ source: 'tok_chargeThenHang', description: `requires_action ${key}` });
    const unknown = await pay(key, body).expect(503);
    expect(unknown.body.code).toBe('card_network_unavailable');
    const [{ id: paymentId }] = await t.dataSource.query<{ id: string }[]>('SELECT id FROM payments WHERE description = $1', [body.description]);
    const succeeded = await waitFor('the payment_intent.succeeded of the payment', async () =>
      (await ledger.events('payment_intent.succeeded')).find((e) => e.data.object.metadata.payment_id === paymentId),
    );

    const requiresAction = structuredClone(succeeded);
    requiresAction.id = `evt_action_${randomUUID().replace(/-/g, '')}`;
    requiresAction.type = 'payment_intent.requires_action';
    requiresAction.data.object.status = 'requires_action';
    expect(await deliver(requiresAction)).toEqual({ received: true, effect: 'nothing_to_do' });
    expect((await getPayment(paymentId)).status).toBe('processing');

    expect(await deliver(succeeded)).toEqual({ received: true, effect: 'settled' });
    expect((await getPayment(paymentId)).status).toBe('succeeded');
    const late = await pay(key, body).expect(201);
    expect(late.headers['idempotent-replayed']).toBe('true');
    expect(late.body).toMatchObject({ id: paymentId, status: 'succeeded' });
    expect((await ledger.chargesDescribed(body.description)).map((c) => c.metadata.payment_id)).toEqual([paymentId]);
  });

  it('a real card token pays once; paid with again under a new key, the network refuses it: 400 on source, nothing charged twice', async () => {
    const token = await ledger.token('4242424242424242');
    expect(token).toMatch(/^tok_1[A-Za-z0-9]+$/);
    const description = `token ${token}`;
    const body = paymentBody({ source: token, amount: 1000, currency: 'usd', description });
    const made = await pay(randomUUID(), body).expect(201);
    expect(made.body).toMatchObject({ amount: 1000, currency: 'usd', status: 'succeeded' });
    const intents = (await ledger.intents()).filter((i) => i.metadata.payment_id === made.body.id);
    expect(intents).toHaveLength(1);
    expect(intents[0]).toMatchObject({ id: await intentOf(made.body.id as string), status: 'succeeded', amount: 1000 });
    expect((intents[0] as unknown as { payment_method: string }).payment_method).toMatch(/^pm_1/);

    // The token is spent: refused by the network before anything is recorded there.
    const key = randomUUID();
    const refused = await pay(key, body).expect(400);
    expect(refused.body).toMatchObject({ code: 'validation_failed', errors: [{ field: 'source', messages: [expect.stringContaining('more than once')] }] });
    // The key was released: the same key is answered afresh (not replayed), the same way.
    const again = await pay(key, body).expect(400);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.body.code).toBe('validation_failed');

    expect((await ledger.intents()).filter((i) => i.description === description).map((i) => i.id)).toEqual([intents[0].id]);
    expect((await ledger.chargesDescribed(description)).map((c) => c.metadata.payment_id)).toEqual([made.body.id]);
    expect(await countRows(t.dataSource, 'payments', 'description = $1', [description])).toBe(1);
  });
});
