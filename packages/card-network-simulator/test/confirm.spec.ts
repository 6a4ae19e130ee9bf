import Stripe from 'stripe';
import { call, createUnconfirmed, eventTypes, simulators, stripeClient, VISA, waitFor } from './support';

/**
 * The two-step payment (create unconfirmed, confirm by id) and cancel, through the
 * official SDK as the app calls them: every test card, the key rules of
 * /confirm, and the state checks that make a second charge impossible.
 */
describe('card network simulator: confirm and cancel', () => {
  const start = simulators();

  describe('charging methods', () => {
    it.each(['pm_card_visa', 'pm_card_mastercard', 'pm_card_amex'])('%s: confirm succeeds; GET tells the same', async (pm) => {
      const sim = await start();
      const stripe = stripeClient(sim);
      const created = await createUnconfirmed(stripe, pm);
      const confirmed = await stripe.paymentIntents.confirm(created.id, { error_on_requires_action: true }, { idempotencyKey: 'confirm-1' });
      expect(confirmed).toMatchObject({
        id: created.id,
        status: 'succeeded',
        amount_received: 1000,
        latest_charge: expect.stringMatching(/^ch_/),
        last_payment_error: null,
        payment_method: pm,
        metadata: { payment_id: 'pay_1' },
      });
      const { lastResponse: _, ...retrieved } = await stripe.paymentIntents.retrieve(created.id);
      const { lastResponse: __, ...answered } = confirmed;
      expect(retrieved).toEqual(answered);
      expect(await eventTypes(sim)).toEqual(['payment_intent.succeeded']);
    });

    it.each([
      ['pm_card_chargeThenHang', Stripe.errors.StripeConnectionError],
      ['pm_card_chargeThenError', Stripe.errors.StripeAPIError],
    ])('%s: the first answer is lost, the charge is not; the same key replays it', async (pm, errorClass) => {
      const sim = await start();
      const stripe = stripeClient(sim, { timeoutMs: 400 });
      const created = await createUnconfirmed(stripe, pm);
      await expect(stripe.paymentIntents.confirm(created.id, { error_on_requires_action: true }, { idempotencyKey: 'confirm-lost' })).rejects.toBeInstanceOf(
        errorClass,
      );
      const retrieved = await stripe.paymentIntents.retrieve(created.id);
      expect(retrieved).toMatchObject({ status: 'succeeded', amount_received: 1000 });
      const replay = await stripe.paymentIntents.confirm(created.id, { error_on_requires_action: true }, { idempotencyKey: 'confirm-lost' });
      expect(replay).toMatchObject({ status: 'succeeded', latest_charge: retrieved.latest_charge });
      expect(replay.lastResponse.headers['idempotent-replayed']).toBe('true');
      expect(await eventTypes(sim)).toEqual(['payment_intent.succeeded']);
    });

    it('pm_card_chargeThenDrop: the SDK resends a reset connection once, even with no retries, and gets the replay', async () => {
      const sim = await start();
      const stripe = stripeClient(sim);
      const created = await createUnconfirmed(stripe, 'pm_card_chargeThenDrop');
      const confirmed = await stripe.paymentIntents.confirm(created.id, { error_on_requires_action: true }, { idempotencyKey: 'confirm-drop' });
      expect(confirmed).toMatchObject({ status: 'succeeded', amount_received: 1000 });
      expect(confirmed.lastResponse.headers['idempotent-replayed']).toBe('true');
      expect(await eventTypes(sim)).toEqual(['payment_intent.succeeded']);
    });
  });

  describe('failing methods', () => {
    it.each([
      ['pm_card_chargeDeclined', 'generic_decline', 'Your card was declined.'],
      ['pm_card_chargeDeclinedInsufficientFunds', 'insufficient_funds', 'Your card has insufficient funds.'],
    ])('%s: 402 card_declined with the intent; it can be confirmed again with another method', async (pm, declineCode, message) => {
      const sim = await start();
      const stripe = stripeClient(sim, { maxNetworkRetries: 2 });
      const created = await createUnconfirmed(stripe, pm);
      const error = await stripe.paymentIntents.confirm(created.id, { error_on_requires_action: true }, { idempotencyKey: 'c-declined' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(Stripe.errors.StripeCardError);
      const card = error as Stripe.errors.StripeCardError;
      expect({ status: card.statusCode, code: card.code, decline_code: card.decline_code, message: card.message }).toEqual({
        status: 402,
        code: 'card_declined',
        decline_code: declineCode,
        message,
      });
      expect(card.headers?.['stripe-should-retry']).toBe('false');
      const lastPaymentError = { type: 'card_error', code: 'card_declined', decline_code: declineCode, message };
      expect(card.payment_intent).toMatchObject({ id: created.id, status: 'requires_payment_method', last_payment_error: lastPaymentError });
      expect(await stripe.paymentIntents.retrieve(created.id)).toMatchObject({ status: 'requires_payment_method', last_payment_error: lastPaymentError });

      const retried = await stripe.paymentIntents.confirm(created.id, { payment_method: 'pm_card_visa', error_on_requires_action: true }, { idempotencyKey: 'c-visa' });
      expect(retried).toMatchObject({ status: 'succeeded', payment_method: 'pm_card_visa', last_payment_error: null, amount_received: 1000 });
      expect(await eventTypes(sim)).toEqual(['payment_intent.payment_failed', 'payment_intent.succeeded']);
    });

    it('pm_card_processingError: 402 card_error processing_error, Stripe-Should-Retry: false, saved under the key', async () => {
      const sim = await start();
      const stripe = stripeClient(sim, { maxNetworkRetries: 2 });
      const created = await createUnconfirmed(stripe, 'pm_card_processingError');
      const confirm = () => stripe.paymentIntents.confirm(created.id, { error_on_requires_action: true }, { idempotencyKey: 'c-proc' }).catch((e: unknown) => e);
      const error = (await confirm()) as Stripe.errors.StripeCardError;
      expect(error).toBeInstanceOf(Stripe.errors.StripeCardError);
      expect({ status: error.statusCode, type: error.rawType, code: error.code }).toEqual({ status: 402, type: 'card_error', code: 'processing_error' });
      expect(error.headers?.['stripe-should-retry']).toBe('false');
      const intent = await stripe.paymentIntents.retrieve(created.id);
      expect(intent).toMatchObject({ status: 'requires_payment_method', amount_received: 0, last_payment_error: { type: 'card_error', code: 'processing_error' } });
      const replayed = (await confirm()) as Stripe.errors.StripeCardError;
      expect(replayed.headers?.['idempotent-replayed']).toBe('true');
      expect(replayed.code).toBe('processing_error');
      expect(await eventTypes(sim)).toEqual(['payment_intent.payment_failed']);
    });

    it('pm_card_authenticationRequired with error_on_requires_action: 402 authentication_required', async () => {
      const sim = await start();
      const stripe = stripeClient(sim);
      const created = await createUnconfirmed(stripe, 'pm_card_authenticationRequired');
      const error = (await stripe.paymentIntents.confirm(created.id, { error_on_requires_action: true }).catch((e: unknown) => e)) as Stripe.errors.StripeCardError;
      expect(error).toBeInstanceOf(Stripe.errors.StripeCardError);
      expect({ code: error.code, decline_code: error.decline_code }).toEqual({ code: 'authentication_required', decline_code: 'authentication_required' });
      expect(await stripe.paymentIntents.retrieve(created.id)).toMatchObject({
        status: 'requires_payment_method',
        last_payment_error: { type: 'card_error', code: 'authentication_required', decline_code: 'authentication_required' },
      });
      expect(await eventTypes(sim)).toEqual(['payment_intent.payment_failed']);
    });

    it('pm_card_authenticationRequired without it: 200 requires_action, which can be canceled but not confirmed', async () => {
      const sim = await start();
      const stripe = stripeClient(sim);
      const created = await createUnconfirmed(stripe, 'pm_card_authenticationRequired');
      const confirmed = await stripe.paymentIntents.confirm(created.id);
      expect(confirmed).toMatchObject({ status: 'requires_action', amount_received: 0, next_action: { type: 'use_stripe_sdk' } });
      const again = (await stripe.paymentIntents.confirm(created.id).catch((e: unknown) => e)) as Stripe.errors.StripeInvalidRequestError;
      expect(again).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
      expect(again.code).toBe('payment_intent_unexpected_state');
      const canceled = await stripe.paymentIntents.cancel(created.id, { cancellation_reason: 'abandoned' });
      expect(canceled).toMatchObject({ status: 'canceled', cancellation_reason: 'abandoned', canceled_at: expect.any(Number), next_action: null });
      expect(await eventTypes(sim)).toEqual(['payment_intent.requires_action', 'payment_intent.canceled']);
    });
  });

  describe('pm_card_chargeProcessing', () => {
    it('answers processing, then succeeds by itself after processingMs (and says so in an event)', async () => {
      const sim = await start({ processingMs: 300 });
      const stripe = stripeClient(sim);
      const created = await createUnconfirmed(stripe, 'pm_card_chargeProcessing');
      const t0 = performance.now();
      const confirmed = await stripe.paymentIntents.confirm(created.id, { error_on_requires_action: true }, { idempotencyKey: 'k-processing' });
      expect(confirmed).toMatchObject({ status: 'processing', amount_received: 0 });
      // Not confirmable while processing, so a retry cannot charge again.
      const again = (await stripe.paymentIntents.confirm(created.id).catch((e: unknown) => e)) as Stripe.errors.StripeInvalidRequestError;
      expect(again.code).toBe('payment_intent_unexpected_state');
      const done = await waitFor(async () => {
        const intent = await stripe.paymentIntents.retrieve(created.id);
        return intent.status === 'succeeded' ? intent : undefined;
      });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
      expect(done).toMatchObject({ amount_received: 1000, latest_charge: confirmed.latest_charge });
      const events = (await stripe.events.list({ limit: 10 })).data;
      expect(events.map((e) => e.type)).toEqual(['payment_intent.succeeded', 'payment_intent.processing']);
      // Nobody asked for the change: no request, as Stripe's automatic events.
      expect(events[0].request).toEqual({ id: null, idempotency_key: null });
      expect(events[1].request).toEqual({ id: confirmed.lastResponse.requestId, idempotency_key: 'k-processing' });
    });
  });

  describe('create with confirm=true behaves as /confirm', () => {
    it.each([
      ['pm_card_chargeProcessing', undefined, 200, 'processing'],
      ['pm_card_authenticationRequired', undefined, 200, 'requires_action'],
      ['pm_card_authenticationRequired', 'true', 402, 'requires_payment_method'],
      ['pm_card_processingError', 'true', 402, 'requires_payment_method'],
      ['pm_card_chargeDeclined', 'true', 402, 'requires_payment_method'],
    ])('%s (error_on_requires_action=%s): %d, intent %s', async (pm, errorOn, status, intentStatus) => {
      const sim = await start({ processingMs: 60_000 });
      const form: Record<string, string | number> = { ...VISA, payment_method: pm };
      if (errorOn) form.error_on_requires_action = errorOn;
      const res = await call(sim.url, { path: '/v1/payment_intents', form });
      expect(res.status).toBe(status);
      const body = res.json<{ status?: string; error?: { payment_intent: { status: string } } }>();
      expect(body.status ?? body.error?.payment_intent.status).toBe(intentStatus);
    });
  });

  describe('refusals', () => {
    it('404 for an unknown intent, 400 for an unknown method or parameter, 405 for GET', async () => {
      const sim = await start();
      const stripe = stripeClient(sim);
      const intent = await createUnconfirmed(stripe, 'pm_card_visa');
      const missing = await call(sim.url, { path: '/v1/payment_intents/pi_nope/confirm', form: {} });
      expect(missing.status).toBe(404);
      expect(missing.json()).toEqual({
        error: { type: 'invalid_request_error', code: 'resource_missing', param: 'intent', message: "No such payment_intent: 'pi_nope'" },
      });
      const path = `/v1/payment_intents/${intent.id}/confirm`;
      const method = await call(sim.url, { path, key: 'k-ref', form: { payment_method: 'pm_card_nonsense' } });
      expect(method.json()).toMatchObject({ error: { code: 'resource_missing', param: 'payment_method' } });
      const unknown = await call(sim.url, { path, key: 'k-ref', form: { amount: 5 } });
      expect(unknown.json()).toMatchObject({ error: { code: 'parameter_unknown', param: 'amount' } });
      const bool = await call(sim.url, { path, key: 'k-ref', form: { error_on_requires_action: 'yes' } });
      expect(bool.json()).toMatchObject({ error: { code: 'parameter_invalid_boolean' } });
      expect((await call(sim.url, { path })).status).toBe(405);
      // None of them used the key or touched the intent.
      expect((await stripe.paymentIntents.retrieve(intent.id)).status).toBe('requires_confirmation');
      expect((await call(sim.url, { path, key: 'k-ref', form: {} })).status).toBe(200);
    });
  });

  describe('cancel', () => {
    it('cancels an unconfirmed intent; a canceled one can be neither confirmed nor canceled again; the key replays', async () => {
      const sim = await start();
      const stripe = stripeClient(sim);
      const intent = await createUnconfirmed(stripe, 'pm_card_visa');
      const canceled = await stripe.paymentIntents.cancel(intent.id, { cancellation_reason: 'duplicate' }, { idempotencyKey: 'k-cancel' });
      expect(canceled).toMatchObject({ status: 'canceled', cancellation_reason: 'duplicate', canceled_at: expect.any(Number), amount_received: 0 });
      const replay = await stripe.paymentIntents.cancel(intent.id, { cancellation_reason: 'duplicate' }, { idempotencyKey: 'k-cancel' });
      expect(replay.lastResponse.headers['idempotent-replayed']).toBe('true');

      const confirm = (await stripe.paymentIntents.confirm(intent.id).catch((e: unknown) => e)) as Stripe.errors.StripeInvalidRequestError;
      expect(confirm.code).toBe('payment_intent_unexpected_state');
      expect(confirm.message).toBe(
        'You cannot confirm this PaymentIntent because it has a status of canceled. Only a PaymentIntent with one of the following statuses may be confirmed: requires_confirmation, requires_payment_method.',
      );
      const again = (await stripe.paymentIntents.cancel(intent.id).catch((e: unknown) => e)) as Stripe.errors.StripeInvalidRequestError;
      expect(again.code).toBe('payment_intent_unexpected_state');
      expect(await eventTypes(sim)).toEqual(['payment_intent.canceled']);
    });

    it('refuses to cancel a succeeded intent, and an unknown reason', async () => {
      const sim = await start();
      const stripe = stripeClient(sim);
      const paid = await stripe.paymentIntents.create({ amount: 500, currency: 'usd', payment_method: 'pm_card_visa', confirm: true });
      const error = (await stripe.paymentIntents.cancel(paid.id).catch((e: unknown) => e)) as Stripe.errors.StripeInvalidRequestError;
      expect({ status: error.statusCode, code: error.code }).toEqual({ status: 400, code: 'payment_intent_unexpected_state' });
      expect(error.message).toContain('status of succeeded');
      const reason = await call(sim.url, { path: `/v1/payment_intents/${paid.id}/cancel`, form: { cancellation_reason: 'bored' } });
      expect(reason.json()).toMatchObject({ error: { param: 'cancellation_reason' } });
      expect((await stripe.paymentIntents.retrieve(paid.id)).status).toBe('succeeded');
    });
  });
});
