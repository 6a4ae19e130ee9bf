import Stripe from 'stripe';
import { REFUND_STATUSES, RunningSimulator } from '../src';
import { call, ListBody, receivers, simulators, stripeClient, VISA, waitFor } from './support';

/**
 * Refunds that settle later, as Stripe's test cards make them: pending then
 * succeeded, pending then failed, succeeded then failed. A failed refund gives
 * its amount back; GETs tell the current status, events tell each change.
 */
describe('card network simulator: refund statuses', () => {
  const start = simulators();
  const receiver = receivers();
  const PROCESSING_MS = 200;

  interface RefundBody {
    id: string;
    status: string;
    amount: number;
    failure_reason?: string;
  }

  async function charge(sim: RunningSimulator, paymentMethod: string, amount = 1000): Promise<string> {
    const res = await call(sim.url, { path: '/v1/payment_intents', form: { ...VISA, amount, payment_method: paymentMethod } });
    expect(res.json()).toMatchObject({ status: 'succeeded' });
    return res.json().id as string;
  }

  const refund = (sim: RunningSimulator, form: Record<string, string | number>, key?: string) => call(sim.url, { path: '/v1/refunds', form, key });
  const get = async (sim: RunningSimulator, id: string) => (await call(sim.url, { path: `/v1/refunds/${id}` })).json<RefundBody>();
  const listed = async (sim: RunningSimulator, pi: string) =>
    (await call(sim.url, { path: `/v1/refunds?payment_intent=${pi}` })).json<ListBody<RefundBody>>().data;
  /** Oldest first: [type, the refund's status in the event, whether a request caused it]. */
  async function refundEvents(sim: RunningSimulator): Promise<[string, string, boolean][]> {
    const events = (await call(sim.url, { path: '/v1/events?type=refund.*&limit=100' })).json<
      ListBody<{ type: string; data: { object: RefundBody }; request: { id: string | null } }>
    >().data;
    return events.reverse().map((e) => [e.type, e.data.object.status, e.request.id !== null]);
  }
  const settled = (sim: RunningSimulator, id: string, status: string) =>
    waitFor(async () => {
      const current = await get(sim, id);
      return current.status === status ? current : undefined;
    });

  it('pm_card_refundPending: pending, then succeeded processingMs later with refund.updated', async () => {
    const sim = await start({ processingMs: PROCESSING_MS });
    const pi = await charge(sim, 'pm_card_refundPending');
    const t0 = performance.now();
    const created = await refund(sim, { payment_intent: pi, amount: 400 }, 'r-pending');
    expect(created.status).toBe(200);
    const body = created.json<RefundBody>();
    expect(body).toMatchObject({ object: 'refund', status: 'pending', amount: 400, payment_intent: pi });
    expect(body).not.toHaveProperty('failure_reason');
    expect(await get(sim, body.id)).toMatchObject({ status: 'pending' });
    expect((await listed(sim, pi)).map((r) => r.status)).toEqual(['pending']);

    const done = await settled(sim, body.id, 'succeeded');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(PROCESSING_MS - 10);
    expect(done).not.toHaveProperty('failure_reason');
    expect((await listed(sim, pi)).map((r) => r.status)).toEqual(['succeeded']);
    expect(await refundEvents(sim)).toEqual([
      ['refund.created', 'pending', true],
      ['refund.updated', 'succeeded', false],
    ]);
    // The key replays the answer as it was given: pending.
    const replay = await refund(sim, { payment_intent: pi, amount: 400 }, 'r-pending');
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(created.text);
    // Succeeded refunds keep counting: 600 remain.
    expect((await refund(sim, { payment_intent: pi, amount: 601 })).json()).toMatchObject({ error: { code: 'amount_too_large' } });
  });

  it('pm_card_refundPendingFail: pending (counted as refunded), then failed with refund.updated and refund.failed; the amount can be refunded again', async () => {
    const sim = await start({ processingMs: PROCESSING_MS });
    const pi = await charge(sim, 'pm_card_refundPendingFail');
    const first = (await refund(sim, { payment_intent: pi })).json<RefundBody>();
    expect(first).toMatchObject({ status: 'pending', amount: 1000 });
    // While pending the charge is fully refunded: nothing more can be.
    expect((await refund(sim, { payment_intent: pi, amount: 1 })).json()).toMatchObject({ error: { code: 'charge_already_refunded' } });

    const failed = await settled(sim, first.id, 'failed');
    expect(failed).toMatchObject({ status: 'failed', failure_reason: 'declined', amount: 1000 });
    expect(await refundEvents(sim)).toEqual([
      ['refund.created', 'pending', true],
      ['refund.updated', 'failed', false],
      ['refund.failed', 'failed', false],
    ]);
    // Given back: the whole charge can be refunded again (and this refund fails the same way).
    const second = await refund(sim, { payment_intent: pi, amount: 1000 });
    expect(second.json()).toMatchObject({ status: 'pending', amount: 1000 });
    expect((await listed(sim, pi)).map((r) => r.status)).toEqual(['pending', 'failed']);
  });

  it('pm_card_refundFail: succeeded at once, then failed processingMs later; the amount is given back', async () => {
    const sim = await start({ processingMs: PROCESSING_MS });
    const pi = await charge(sim, 'pm_card_refundFail');
    const first = (await refund(sim, { payment_intent: pi, amount: 700 })).json<RefundBody>();
    expect(first).toMatchObject({ status: 'succeeded', amount: 700 });
    expect(first).not.toHaveProperty('failure_reason');
    expect((await refund(sim, { payment_intent: pi, amount: 301 })).json()).toMatchObject({ error: { code: 'amount_too_large' } });

    expect(await settled(sim, first.id, 'failed')).toMatchObject({ failure_reason: 'declined' });
    expect(await refundEvents(sim)).toEqual([
      ['refund.created', 'succeeded', true],
      ['refund.updated', 'failed', false],
      ['refund.failed', 'failed', false],
    ]);
    expect((await refund(sim, { payment_intent: pi, amount: 1000 })).json()).toMatchObject({ status: 'succeeded', amount: 1000 });
  });

  it('pm_card_visa: succeeded at once and stays so; no later event', async () => {
    const sim = await start({ processingMs: 50 });
    const pi = await charge(sim, 'pm_card_visa');
    const created = (await refund(sim, { payment_intent: pi, amount: 100 })).json<RefundBody>();
    expect(created.status).toBe('succeeded');
    // A pending refund made after it settles processingMs on: by then a later change of
    // the first, had one been scheduled, would have come first.
    const marker = (await refund(sim, { payment_intent: await charge(sim, 'pm_card_refundPending'), amount: 100 })).json<RefundBody>();
    await settled(sim, marker.id, 'succeeded');
    expect((await get(sim, created.id)).status).toBe('succeeded');
    expect(await refundEvents(sim)).toEqual([
      ['refund.created', 'succeeded', true],
      ['refund.created', 'pending', true],
      ['refund.updated', 'succeeded', false],
    ]);
  });

  it('through the stripe SDK: retrieve and list tell the current status; every status is one of Stripe\'s', async () => {
    const sim = await start({ processingMs: PROCESSING_MS });
    const stripe = stripeClient(sim);
    const paid = await stripe.paymentIntents.create({ amount: 1500, currency: 'eur', payment_method: 'pm_card_refundPendingFail', confirm: true });
    const created = await stripe.refunds.create({ payment_intent: paid.id, amount: 500, metadata: { refund_id: 'ref_1' } }, { idempotencyKey: 'sdk-refund' });
    expect(created).toMatchObject({ status: 'pending', currency: 'eur', metadata: { refund_id: 'ref_1' } });
    const failed = await waitFor(async () => {
      const current = await stripe.refunds.retrieve(created.id);
      return current.status === 'failed' ? current : undefined;
    });
    expect(failed.failure_reason).toBe('declined');
    const all: Stripe.Refund[] = [];
    for await (const r of stripe.refunds.list({ payment_intent: paid.id, limit: 100 })) all.push(r);
    expect(all.map((r) => [r.id, r.status])).toEqual([[created.id, 'failed']]);
    expect(REFUND_STATUSES).toEqual(['pending', 'succeeded', 'failed', 'canceled']);
    expect(REFUND_STATUSES).toContain(failed.status);
  });

  it('webhooks carry refund.updated and refund.failed, signed like every event', async () => {
    const endpoint = await receiver();
    const whsec = 'whsec_refund_statuses';
    const sim = await start({ processingMs: 50, webhook: { url: endpoint.url, secret: whsec, retryScheduleMs: [50] } });
    const pi = await charge(sim, 'pm_card_refundFail');
    const created = (await refund(sim, { payment_intent: pi, amount: 250 })).json<RefundBody>();
    await waitFor(() => endpoint.deliveries.length === 4);
    const stripe = new Stripe('sk_test_x');
    const delivered = endpoint.deliveries.map((d) => stripe.webhooks.constructEvent(d.payload, d.headers['stripe-signature']!, whsec));
    const refundEvents = delivered.filter((e) => e.type.startsWith('refund.'));
    expect(refundEvents.map((e) => e.type).sort()).toEqual(['refund.created', 'refund.failed', 'refund.updated']);
    for (const e of refundEvents) expect((e.data.object as Stripe.Refund).id).toBe(created.id);
    const failedEvent = refundEvents.find((e) => e.type === 'refund.failed')!;
    expect(failedEvent.data.object).toMatchObject({ status: 'failed', failure_reason: 'declined', amount: 250 });
    expect(failedEvent.request).toEqual({ id: null, idempotency_key: null });
  });

  it('a card token whose number refunds late (4000000000007726) pays a pm_... whose refunds are pending first', async () => {
    const sim = await start({ processingMs: PROCESSING_MS });
    const token = (
      await call(sim.url, { path: '/v1/tokens', form: { 'card[number]': '4000000000007726', 'card[exp_month]': '12', 'card[exp_year]': '2040' } })
    ).json().id as string;
    const paid = await call(sim.url, {
      path: '/v1/payment_intents',
      form: { amount: 1000, currency: 'usd', confirm: 'true', 'payment_method_data[type]': 'card', 'payment_method_data[card][token]': token },
    });
    expect(paid.json()).toMatchObject({ status: 'succeeded', payment_method: expect.stringMatching(/^pm_1/) });
    const created = (await refund(sim, { payment_intent: paid.json().id as string })).json<RefundBody>();
    expect(created.status).toBe('pending');
    await settled(sim, created.id, 'succeeded');
  });
});

/** POST /v1/refunds: partial and full refunds, what can still be refunded, the refusals, lists and replays. */
describe('card network simulator: POST /v1/refunds', () => {
  const start = simulators();

  async function charge(url: string, amount = 1000): Promise<string> {
    return (await call(url, { path: '/v1/payment_intents', form: { ...VISA, amount } })).json().id as string;
  }

  it('refunds partially, then what remains; never more than was received', async () => {
    const sim = await start();
    const pi = await charge(sim.url);
    const partial = await call(sim.url, { path: '/v1/refunds', form: { payment_intent: pi, amount: 300, 'metadata[reason]': 'late' } });
    expect(partial.status).toBe(200);
    expect(partial.json()).toEqual({
      id: expect.stringMatching(/^re_[A-Za-z0-9]+$/),
      object: 'refund',
      amount: 300,
      charge: expect.stringMatching(/^ch_/),
      currency: 'usd',
      payment_intent: pi,
      status: 'succeeded',
      metadata: { reason: 'late' },
      created: expect.any(Number),
    });
    const tooMuch = await call(sim.url, { path: '/v1/refunds', form: { payment_intent: pi, amount: 701 } });
    expect(tooMuch.status).toBe(400);
    expect(tooMuch.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'amount_too_large' } });
    const rest = await call(sim.url, { path: '/v1/refunds', form: { payment_intent: pi } });
    expect(rest.json()).toMatchObject({ amount: 700, metadata: {} });
    const none = await call(sim.url, { path: '/v1/refunds', form: { payment_intent: pi, amount: 1 } });
    expect(none.status).toBe(400);
    expect(none.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'charge_already_refunded' } });
  });

  it('refuses an unknown or unpaid intent and bad amounts', async () => {
    const sim = await start();
    const declined = await call(sim.url, { path: '/v1/payment_intents', form: { ...VISA, payment_method: 'pm_card_chargeDeclined' } });
    const declinedId = declined.json<{ error: { payment_intent: { id: string } } }>().error.payment_intent.id;
    const pi = await charge(sim.url);
    for (const [form, error] of [
      [{ payment_intent: 'pi_nope' }, { code: 'resource_missing', param: 'payment_intent' }],
      [{ payment_intent: declinedId }, { param: 'payment_intent' }],
      [{}, { code: 'parameter_missing', param: 'payment_intent' }],
      [{ payment_intent: pi, amount: 0 }, { code: 'amount_too_small', param: 'amount' }],
      [{ payment_intent: pi, amount: 'x' }, { code: 'parameter_invalid_integer', param: 'amount' }],
      [{ payment_intent: pi, reason: 'x' }, { code: 'parameter_unknown', param: 'reason' }],
    ] as [Record<string, string | number>, Record<string, string>][]) {
      const res = await call(sim.url, { path: '/v1/refunds', form });
      expect({ status: res.status, body: res.json() }).toEqual({
        status: 400,
        body: { error: expect.objectContaining({ type: 'invalid_request_error', ...error }) },
      });
    }
    const list = await call(sim.url, { path: '/v1/refunds' });
    expect(list.json<ListBody>().data).toHaveLength(0);
  });

  it('lists refunds newest first, filtered by payment_intent; keyed refunds replay', async () => {
    const sim = await start();
    const a = await charge(sim.url);
    const b = await charge(sim.url);
    const r1 = (await call(sim.url, { path: '/v1/refunds', key: 'r1', form: { payment_intent: a, amount: 100 } })).json().id;
    const r2 = (await call(sim.url, { path: '/v1/refunds', form: { payment_intent: b, amount: 100 } })).json().id;
    const r3 = (await call(sim.url, { path: '/v1/refunds', form: { payment_intent: a, amount: 100 } })).json().id;
    const replay = await call(sim.url, { path: '/v1/refunds', key: 'r1', form: { amount: 100, payment_intent: a } });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json().id).toBe(r1);

    const all = (await call(sim.url, { path: '/v1/refunds' })).json<ListBody>();
    expect(all.url).toBe('/v1/refunds');
    expect(all.data.map((r) => r.id)).toEqual([r3, r2, r1]);
    const ofA = (await call(sim.url, { path: `/v1/refunds?payment_intent=${a}&limit=1` })).json<ListBody>();
    expect(ofA.data.map((r) => r.id)).toEqual([r3]);
    expect(ofA.has_more).toBe(true);
    const next = (await call(sim.url, { path: `/v1/refunds?payment_intent=${a}&limit=1&starting_after=${r3 as string}` })).json<ListBody>();
    expect(next.data.map((r) => r.id)).toEqual([r1]);
    expect(next.has_more).toBe(false);
    expect((await call(sim.url, { path: `/v1/refunds/${r2 as string}` })).json()).toMatchObject({ id: r2, amount: 100 });
    // 100 + 100 refunded of a's 1000: 800 remain.
    expect((await call(sim.url, { path: '/v1/refunds', form: { payment_intent: a } })).json()).toMatchObject({ amount: 800 });
  });
});
