import Stripe from 'stripe';
import { RunningSimulator, WebhookStats } from '../src';
import { call, Delivery, ListBody, OTHER_SECRET, receivers, SECRET, simulators, VISA, waitFor } from './support';

/**
 * Events and their webhooks as a receiver sees them: signed so the SDK verifies
 * them, retried until a 2xx, and (on request) duplicated, reordered, late or paused.
 */
describe('card network simulator: events and webhooks', () => {
  const start = simulators();
  const receiver = receivers();
  const WHSEC = 'whsec_test_simulator_signing_secret';
  const FAST = { secret: WHSEC, retryScheduleMs: [50, 100] };

  const stats = async (sim: RunningSimulator, secret = SECRET) =>
    (await call(sim.url, { path: '/_simulator/stats', secret })).json<{ webhooks: WebhookStats }>().webhooks;
  const pay = async (sim: RunningSimulator, form: Record<string, string | number> = VISA, secret = SECRET) =>
    (await call(sim.url, { path: '/v1/payment_intents', form, secret })).json();
  const settled = (sim: RunningSimulator, secret = SECRET) =>
    waitFor(async () => {
      const s = await stats(sim, secret);
      return s.pending === 0 && s.queued === 0 ? s : undefined;
    });
  const intentIds = (deliveries: Delivery[]) => deliveries.map((d) => d.event.data.object.id);

  it('signs each delivery so stripe.webhooks.constructEvent verifies it; the event is Stripe-shaped', async () => {
    const endpoint = await receiver();
    const sim = await start({ webhook: { url: endpoint.url, ...FAST } });
    const res = await call(sim.url, { path: '/v1/payment_intents', key: 'k-pay', form: { ...VISA, 'metadata[payment_id]': 'pay_1' } });
    await waitFor(() => endpoint.deliveries.length === 1, () => endpoint.deliveries.length);
    const [delivery] = endpoint.deliveries;

    const event = new Stripe('sk_test_x').webhooks.constructEvent(delivery.payload, delivery.headers['stripe-signature']!, WHSEC);
    expect(event).toEqual({
      id: expect.stringMatching(/^evt_[A-Za-z0-9]{24}$/),
      object: 'event',
      api_version: expect.stringMatching(/^\d{4}-\d{2}-\d{2}\./),
      created: expect.any(Number),
      livemode: false,
      pending_webhooks: 1,
      type: 'payment_intent.succeeded',
      data: { object: res.json() },
      request: { id: res.headers['request-id'], idempotency_key: 'k-pay' },
    });
    expect(delivery.headers['stripe-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(delivery.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(delivery.headers['user-agent']).toBe('Stripe/1.0 (+https://stripe.com/docs/webhooks)');
    expect(() => new Stripe('sk_test_x').webhooks.constructEvent(delivery.payload, delivery.headers['stripe-signature']!, 'whsec_wrong')).toThrow(
      Stripe.errors.StripeSignatureVerificationError,
    );
    expect(await settled(sim)).toMatchObject({ delivered: 1, failed_attempts: 0 });
    // Delivered: the listed event says no webhook is pending any more.
    expect((await call(sim.url, { path: `/v1/events/${event.id}` })).json()).toMatchObject({ id: event.id, pending_webhooks: 0 });
  });

  it('emits at effect time: the webhook tells what a lost answer would have', async () => {
    const endpoint = await receiver();
    const sim = await start({ webhook: { url: endpoint.url, ...FAST } });
    const created = await pay(sim, { ...VISA, confirm: 'false', payment_method: 'pm_card_chargeThenDrop' });
    await expect(call(sim.url, { path: `/v1/payment_intents/${created.id as string}/confirm`, key: 'k-lost', form: {} })).rejects.toThrow();
    await waitFor(() => endpoint.deliveries.length === 1, () => endpoint.deliveries.length);
    expect(endpoint.deliveries[0].event).toMatchObject({ type: 'payment_intent.succeeded', data: { object: { id: created.id, status: 'succeeded' } } });
  });

  it('emits each event type with the object as it was then', async () => {
    const endpoint = await receiver();
    const sim = await start({ processingMs: 50, webhook: { url: endpoint.url, ...FAST } });
    const paid = await pay(sim);
    await pay(sim, { ...VISA, payment_method: 'pm_card_chargeDeclined' });
    await pay(sim, { ...VISA, payment_method: 'pm_card_processingError' });
    await pay(sim, { ...VISA, payment_method: 'pm_card_authenticationRequired', error_on_requires_action: 'true' });
    const action = await pay(sim, { ...VISA, payment_method: 'pm_card_authenticationRequired' });
    await call(sim.url, { path: `/v1/payment_intents/${action.id as string}/cancel`, form: {} });
    await pay(sim, { ...VISA, payment_method: 'pm_card_chargeProcessing' });
    const refund = (await call(sim.url, { path: '/v1/refunds', form: { payment_intent: paid.id as string, amount: 100 } })).json();
    await waitFor(() => endpoint.deliveries.length === 9, () => endpoint.deliveries.length);
    await settled(sim);
    // Each object as it was when its event happened: the requires_action intent was canceled later.
    const seen = endpoint.deliveries.map((d) => `${d.event.type} ${d.event.data.object.status as string}`).sort();
    expect(seen).toEqual([
      'payment_intent.canceled canceled',
      'payment_intent.payment_failed requires_payment_method',
      'payment_intent.payment_failed requires_payment_method',
      'payment_intent.payment_failed requires_payment_method',
      'payment_intent.processing processing',
      'payment_intent.requires_action requires_action',
      'payment_intent.succeeded succeeded',
      'payment_intent.succeeded succeeded',
      'refund.created succeeded',
    ]);
    const refundEvent = endpoint.deliveries.find((d) => d.event.type === 'refund.created')!;
    expect(refundEvent.event.data.object).toEqual(refund);
  });

  it('retries a failing endpoint on the schedule, signing each attempt anew, until it answers 2xx', async () => {
    const endpoint = await receiver((n) => (n <= 2 ? 500 : 200));
    const sim = await start({ webhook: { url: endpoint.url, ...FAST } });
    await pay(sim);
    await waitFor(() => endpoint.deliveries.length === 3, () => endpoint.deliveries.length);
    const final = await settled(sim);
    expect(final).toMatchObject({ delivered: 1, failed_attempts: 2, abandoned: 0 });
    const stripe = new Stripe('sk_test_x');
    for (const d of endpoint.deliveries) expect(stripe.webhooks.constructEvent(d.payload, d.headers['stripe-signature']!, WHSEC).id).toBe(endpoint.deliveries[0].event.id);
    // The schedule: 50 ms before the second attempt, 100 ms before the third.
    const [a, b, c] = endpoint.deliveries.map((d) => d.at);
    expect(b - a).toBeGreaterThanOrEqual(45);
    expect(c - b).toBeGreaterThanOrEqual(95);
  });

  it('retries connection errors and timeouts, then gives up after maxAttempts', async () => {
    const gone = await receiver();
    await gone.close();
    const silent = await receiver(() => null);
    const sim = await start({ webhook: { url: gone.url, secret: WHSEC, retryScheduleMs: [20], maxAttempts: 3, timeoutMs: 100 } });
    await pay(sim);
    expect(await settled(sim)).toMatchObject({ delivered: 0, failed_attempts: 3, abandoned: 1 });
    sim.setWebhook({ url: silent.url, secret: WHSEC });
    await pay(sim);
    expect(await settled(sim)).toMatchObject({ delivered: 0, failed_attempts: 6, abandoned: 2 });
    expect(silent.deliveries).toHaveLength(3);
  });

  it('setWebhook points delivery at an endpoint after start, and null stops it', async () => {
    const endpoint = await receiver();
    const sim = await start();
    await pay(sim);
    sim.setWebhook({ url: endpoint.url, secret: WHSEC });
    const second = await pay(sim);
    await waitFor(() => endpoint.deliveries.length === 1, () => endpoint.deliveries.length);
    expect(endpoint.deliveries[0].event.data.object.id).toBe(second.id);
    sim.setWebhook(null);
    await pay(sim);
    expect((await call(sim.url, { path: '/v1/events' })).json<ListBody>().data).toHaveLength(3);
    expect(await settled(sim)).toMatchObject({ delivered: 1 });
    expect(endpoint.deliveries).toHaveLength(1);
    expect(() => sim.setWebhook({ url: 'ftp://example.invalid', secret: WHSEC })).toThrow(RangeError);
  });

  describe('webhook faults', () => {
    it('duplicate: the next n events are sent `copies` times at once', async () => {
      const endpoint = await receiver();
      const sim = await start({ webhook: { url: endpoint.url, ...FAST } });
      const set = await call(sim.url, { path: '/_simulator/webhook-faults', json: { fault: 'duplicate', times: 1, copies: 3 } });
      expect(set.status).toBe(200);
      expect((await stats(sim)).pending_faults).toBe(1);
      const first = await pay(sim);
      const second = await pay(sim);
      await waitFor(() => endpoint.deliveries.length === 4, () => endpoint.deliveries.length);
      expect(await settled(sim)).toMatchObject({ delivered: 4, pending_faults: 0 });
      expect(intentIds(endpoint.deliveries).sort()).toEqual([first.id, first.id, first.id, second.id].sort());
      expect(new Set(endpoint.deliveries.filter((d) => d.event.data.object.id === first.id).map((d) => d.event.id)).size).toBe(1);
    });

    it('an unknown fault is refused with its parameter, and nothing is queued', async () => {
      const endpoint = await receiver();
      const sim = await start({ webhook: { url: endpoint.url, ...FAST } });
      const bad = await call(sim.url, { path: '/_simulator/webhook-faults', json: { fault: 'explode', times: 2 } });
      expect(bad.status).toBe(400);
      expect(bad.json()).toMatchObject({ error: { code: 'parameter_invalid', param: 'fault', message: 'fault must be one of duplicate, out_of_order, late' } });
      expect((await stats(sim)).pending_faults).toBe(0);
    });

    it('out_of_order: the next event goes out right after the one that follows it', async () => {
      const endpoint = await receiver();
      const sim = await start({ webhook: { url: endpoint.url, ...FAST } });
      await call(sim.url, { path: '/_simulator/webhook-faults', form: { fault: 'out_of_order' } });
      const first = await pay(sim);
      expect(await stats(sim)).toMatchObject({ pending: 1 });
      const second = await pay(sim);
      await waitFor(() => endpoint.deliveries.length === 2, () => endpoint.deliveries.length);
      expect(intentIds(endpoint.deliveries)).toEqual([second.id, first.id]);
    });

    it('out_of_order with nothing following: the event goes out on its own about 2 s later', async () => {
      const endpoint = await receiver();
      const sim = await start({ webhook: { url: endpoint.url, ...FAST } });
      await call(sim.url, { path: '/_simulator/webhook-faults', json: { fault: 'out_of_order' } });
      const t0 = performance.now();
      const only = await pay(sim);
      await waitFor(() => endpoint.deliveries.length === 1, () => endpoint.deliveries.length);
      expect(endpoint.deliveries[0].at - t0).toBeGreaterThanOrEqual(1_900);
      expect(intentIds(endpoint.deliveries)).toEqual([only.id]);
    });

    it('late: the next n events are delayed by delay_ms; the ones after them are not', async () => {
      const endpoint = await receiver();
      const sim = await start({ webhook: { url: endpoint.url, ...FAST } });
      await call(sim.url, { path: '/_simulator/webhook-faults', json: { fault: 'late', times: 1, delay_ms: 400 } });
      const t0 = performance.now();
      const late = await pay(sim);
      const prompt = await pay(sim);
      await waitFor(() => endpoint.deliveries.length === 2, () => endpoint.deliveries.length);
      expect(intentIds(endpoint.deliveries)).toEqual([prompt.id, late.id]);
      expect(endpoint.deliveries[1].at - t0).toBeGreaterThanOrEqual(390);
    });

    it('DELETE clears; faults are per account; bad bodies are refused', async () => {
      const endpoint = await receiver();
      const sim = await start({ webhook: { url: endpoint.url, ...FAST } });
      await call(sim.url, { path: '/_simulator/webhook-faults', json: { fault: 'duplicate', times: 5 } });
      expect((await stats(sim)).pending_faults).toBe(5);
      expect((await stats(sim, OTHER_SECRET)).pending_faults).toBe(0);
      await pay(sim, VISA, OTHER_SECRET);
      await waitFor(() => endpoint.deliveries.length === 1, () => endpoint.deliveries.length);
      const cleared = await call(sim.url, { method: 'DELETE', path: '/_simulator/webhook-faults' });
      expect(cleared.json()).toMatchObject({ webhooks: { pending_faults: 0 } });
      await pay(sim);
      await waitFor(() => endpoint.deliveries.length === 2, () => endpoint.deliveries.length);
      expect(await settled(sim)).toMatchObject({ delivered: 1 });
      for (const body of [{ fault: 'explode' }, { fault: 'late', delay_ms: -1 }, { fault: 'duplicate', copies: 'x' }, { fault: 'late', times: 0 }]) {
        const res = await call(sim.url, { path: '/_simulator/webhook-faults', json: body });
        expect({ body, status: res.status }).toEqual({ body, status: 400 });
      }
    });
  });

  it('pause queues events without sending them; resume hands them to delivery', async () => {
    const endpoint = await receiver();
    const sim = await start({ webhook: { url: endpoint.url, ...FAST } });
    expect((await call(sim.url, { path: '/_simulator/webhooks/pause', form: {} })).json()).toMatchObject({ webhooks: { paused: true } });
    const ids = [(await pay(sim)).id, (await pay(sim)).id, (await pay(sim)).id];
    expect(await stats(sim)).toMatchObject({ paused: true, queued: 3, pending: 0, delivered: 0 });
    // Another account is not paused.
    await pay(sim, VISA, OTHER_SECRET);
    await waitFor(() => endpoint.deliveries.length === 1, () => endpoint.deliveries.length);
    const resumed = await call(sim.url, { path: '/_simulator/webhooks/resume', form: {} });
    expect(resumed.json()).toMatchObject({ resumed: 3, webhooks: { paused: false, queued: 0 } });
    await waitFor(() => endpoint.deliveries.length === 4, () => endpoint.deliveries.length);
    expect(await settled(sim)).toMatchObject({ delivered: 3 });
    expect(intentIds(endpoint.deliveries.slice(1)).sort()).toEqual([...ids].sort());
  });

  it('close() ends deliveries in flight and pending retries at once', async () => {
    // The first event's delivery fails and waits for its retry; the second's is never
    // answered. Both the retry and the attempt's timeout are due long after the test's
    // timeout: a close() that waited for either fails the test, and only close() can
    // end the unanswered delivery.
    const endpoint = await receiver((n) => (n === 1 ? 500 : null));
    const muchLater = 10 * 60_000;
    const sim = await start({ webhook: { url: endpoint.url, secret: WHSEC, retryScheduleMs: [muchLater], timeoutMs: muchLater } });
    await pay(sim);
    await waitFor(async () => (await stats(sim)).failed_attempts === 1, () => stats(sim));
    await pay(sim);
    await waitFor(() => endpoint.deliveries.length === 2, () => endpoint.deliveries.length);
    expect(await stats(sim)).toMatchObject({ pending: 2, delivered: 0 });
    await sim.close();
    await waitFor(() => endpoint.deliveries[1].closed);
    expect(endpoint.deliveries).toHaveLength(2);
  });

  describe('GET /v1/events', () => {
    it('lists newest first with type filter and pagination; retrieves one; the SDK reads them', async () => {
      const sim = await start();
      const paid = await pay(sim);
      await pay(sim, { ...VISA, payment_method: 'pm_card_chargeDeclined' });
      await call(sim.url, { path: '/v1/refunds', form: { payment_intent: paid.id as string } });
      const all = (await call(sim.url, { path: '/v1/events' })).json<ListBody<{ id: string; type: string }>>();
      expect(all).toMatchObject({ object: 'list', url: '/v1/events', has_more: false });
      expect(all.data.map((e) => e.type)).toEqual(['refund.created', 'payment_intent.payment_failed', 'payment_intent.succeeded']);
      // No endpoint: nothing is pending for these events.
      expect(all.data.every((e) => (e as unknown as { pending_webhooks: number }).pending_webhooks === 0)).toBe(true);

      const page = (await call(sim.url, { path: `/v1/events?limit=1&starting_after=${all.data[0].id}` })).json<ListBody<{ id: string }>>();
      expect(page.data.map((e) => e.id)).toEqual([all.data[1].id]);
      expect(page.has_more).toBe(true);
      const typed = (await call(sim.url, { path: '/v1/events?type=payment_intent.succeeded' })).json<ListBody<{ type: string }>>();
      expect(typed.data.map((e) => e.type)).toEqual(['payment_intent.succeeded']);
      const wildcard = (await call(sim.url, { path: '/v1/events?type=payment_intent.*' })).json<ListBody>();
      expect(wildcard.data).toHaveLength(2);

      const stripe = new Stripe(SECRET, { host: '127.0.0.1', port: sim.port, protocol: 'http', telemetry: false, maxNetworkRetries: 0 });
      const one = await stripe.events.retrieve(all.data[2].id);
      expect(one).toMatchObject({ type: 'payment_intent.succeeded', data: { object: { id: paid.id } } });
      const seen: string[] = [];
      for await (const event of stripe.events.list({ limit: 1 })) seen.push(event.id);
      expect(seen).toEqual(all.data.map((e) => e.id));

      expect((await call(sim.url, { path: '/v1/events/evt_nope' })).status).toBe(404);
      expect((await call(sim.url, { path: '/v1/events/evt_nope', secret: OTHER_SECRET })).json()).toMatchObject({ error: { code: 'resource_missing' } });
      expect((await call(sim.url, { path: '/v1/events', secret: OTHER_SECRET })).json<ListBody>().data).toHaveLength(0);
      expect((await call(sim.url, { path: '/v1/events', form: {} })).status).toBe(405);
      expect((await call(sim.url, { path: '/v1/events?starting_after=evt_nope' })).json()).toMatchObject({ error: { param: 'starting_after' } });
    });
  });
});
