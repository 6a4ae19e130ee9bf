import Stripe from 'stripe';
import { call, listIntents, ListBody, OTHER_SECRET, SECRET, simulators, stripeClient, VISA } from './support';

/** The Stripe-shaped API: auth, PaymentIntents, lists and accounts (keys and timing: idempotency.spec.ts; refunds: refunds.spec.ts). */
describe('card network simulator: API', () => {
  const start = simulators();

  describe('auth', () => {
    it('answers 401 for a missing or unknown key, masking it, with Request-Id and JSON', async () => {
      const sim = await start();
      const missing = await call(sim.url, { path: '/v1/payment_intents', secret: null });
      expect(missing.status).toBe(401);
      expect(missing.json()).toEqual({ error: { type: 'invalid_request_error', message: expect.stringContaining('did not provide an API key') } });

      const wrong = await call(sim.url, { path: '/v1/payment_intents', secret: 'sk_test_wrong_key_00000000cdef', form: VISA });
      expect(wrong.status).toBe(401);
      expect(wrong.json()).toEqual({ error: { type: 'invalid_request_error', message: 'Invalid API Key provided: sk_test_****cdef' } });
      expect(wrong.text).not.toContain('wrong_key');
      expect(wrong.headers['content-type']).toBe('application/json');
      expect(wrong.headers['request-id']).toMatch(/^req_[A-Za-z0-9]+$/);
      expect(await listIntents(sim.url)).toHaveLength(0);
    });

    it('accepts HTTP Basic with the secret as username, as Stripe does', async () => {
      const sim = await start();
      const basic = `Basic ${Buffer.from(`${SECRET}:`).toString('base64')}`;
      const res = await call(sim.url, { path: '/v1/payment_intents', authorization: basic });
      expect(res.status).toBe(200);
      const bad = `Basic ${Buffer.from('sk_test_nope_1234567890:').toString('base64')}`;
      expect((await call(sim.url, { path: '/v1/payment_intents', authorization: bad })).status).toBe(401);
    });
  });

  describe('POST /v1/payment_intents', () => {
    it('charges pm_card_visa: a succeeded PaymentIntent in Stripe shape', async () => {
      const sim = await start();
      const sentAt = Math.floor(Date.now() / 1000);
      const res = await call(sim.url, {
        path: '/v1/payment_intents',
        form: { ...VISA, currency: 'EUR', description: 'order 7', 'metadata[payment_id]': 'pay_1', 'metadata[order]': '7' },
      });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/json');
      expect(res.headers['request-id']).toMatch(/^req_/);
      const intent = res.json();
      expect(intent).toEqual({
        id: expect.stringMatching(/^pi_[A-Za-z0-9]{24}$/),
        object: 'payment_intent',
        amount: 1000,
        amount_received: 1000,
        currency: 'eur',
        status: 'succeeded',
        payment_method: 'pm_card_visa',
        confirmation_method: 'automatic',
        description: 'order 7',
        metadata: { payment_id: 'pay_1', order: '7' },
        created: expect.any(Number),
        latest_charge: expect.stringMatching(/^ch_[A-Za-z0-9]+$/),
        last_payment_error: null,
        next_action: null,
        canceled_at: null,
        cancellation_reason: null,
        livemode: false,
      });
      // Unix seconds of this process's clock, taken between sending and the answer.
      expect(intent.created).toBeGreaterThanOrEqual(sentAt);
      expect(intent.created).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
      const fetched = await call(sim.url, { path: `/v1/payment_intents/${intent.id as string}` });
      expect(fetched.status).toBe(200);
      expect(fetched.json()).toEqual(intent);
    });

    it('charges mastercard and amex too; without confirm nothing is charged', async () => {
      const sim = await start();
      for (const pm of ['pm_card_mastercard', 'pm_card_amex']) {
        const res = await call(sim.url, { path: '/v1/payment_intents', form: { ...VISA, payment_method: pm } });
        expect(res.json()).toMatchObject({ status: 'succeeded', payment_method: pm });
      }
      const unconfirmed = await call(sim.url, { path: '/v1/payment_intents', form: { amount: 500, currency: 'usd', payment_method: 'pm_card_chargeDeclined' } });
      expect(unconfirmed.status).toBe(200);
      expect(unconfirmed.json()).toMatchObject({ status: 'requires_confirmation', amount_received: 0, latest_charge: null, description: null, metadata: {} });
      expect((await listIntents(sim.url))[0]).toEqual(unconfirmed.json());
    });

    it.each([
      ['pm_card_chargeDeclined', 'generic_decline', 'Your card was declined.'],
      ['pm_card_chargeDeclinedInsufficientFunds', 'insufficient_funds', 'Your card has insufficient funds.'],
    ])('declines %s with 402 card_error and records the failed intent', async (pm, declineCode, message) => {
      const sim = await start();
      const res = await call(sim.url, { path: '/v1/payment_intents', form: { ...VISA, payment_method: pm } });
      expect(res.status).toBe(402);
      const body = res.json<{ error: { payment_intent: { id: string } } }>();
      const lastPaymentError = { type: 'card_error', code: 'card_declined', decline_code: declineCode, message };
      expect(body).toEqual({
        error: {
          type: 'card_error',
          code: 'card_declined',
          decline_code: declineCode,
          message,
          payment_intent: expect.objectContaining({
            object: 'payment_intent',
            status: 'requires_payment_method',
            amount_received: 0,
            latest_charge: null,
            payment_method: pm,
            last_payment_error: lastPaymentError,
          }),
        },
      });
      const recorded = await listIntents(sim.url);
      expect(recorded).toEqual([body.error.payment_intent]);
    });

    it('pm_card_processingError: 402 card_error processing_error after the delay, the failed intent recorded and saved under the key', async () => {
      const sim = await start({ delayMs: 150 });
      const form = { ...VISA, payment_method: 'pm_card_processingError' };
      const t0 = performance.now();
      const res = await call(sim.url, { path: '/v1/payment_intents', key: 'k-proc', form });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
      expect(res.status).toBe(402);
      expect(res.headers['stripe-should-retry']).toBe('false');
      const lastPaymentError = { type: 'card_error', code: 'processing_error', message: 'An error occurred while processing your card. Try again in a little bit.' };
      const body = res.json<{ error: { payment_intent: Record<string, unknown> } }>();
      expect(body).toEqual({
        error: {
          ...lastPaymentError,
          payment_intent: expect.objectContaining({ status: 'requires_payment_method', amount_received: 0, last_payment_error: lastPaymentError }),
        },
      });
      expect(await listIntents(sim.url)).toEqual([body.error.payment_intent]);
      const replay = await call(sim.url, { path: '/v1/payment_intents', key: 'k-proc', form });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(res.text);
      expect(await listIntents(sim.url)).toHaveLength(1);
    });

    it('refuses bad parameters with 400 invalid_request_error, records nothing and leaves the key free', async () => {
      const sim = await start();
      const cases: [Record<string, string | number>, Record<string, unknown>][] = [
        [{ ...VISA, payment_method: 'pm_card_nonsense' }, { code: 'resource_missing', param: 'payment_method', message: "No such PaymentMethod: 'pm_card_nonsense'" }],
        [{ ...VISA, color: 'red' }, { code: 'parameter_unknown', param: 'color' }],
        [{ currency: 'usd', payment_method: 'pm_card_visa' }, { code: 'parameter_missing', param: 'amount' }],
        [{ ...VISA, amount: '12.5' }, { code: 'parameter_invalid_integer', param: 'amount' }],
        [{ ...VISA, amount: 0 }, { code: 'amount_too_small', param: 'amount' }],
        [{ amount: 1000, payment_method: 'pm_card_visa' }, { code: 'parameter_missing', param: 'currency' }],
        [{ ...VISA, currency: 'dollars' }, { param: 'currency' }],
        [{ amount: 1000, currency: 'usd' }, { code: 'parameter_missing', param: 'payment_method' }],
        [{ ...VISA, confirm: 'yes' }, { code: 'parameter_invalid_boolean', param: 'confirm' }],
      ];
      for (const [form, error] of cases) {
        const res = await call(sim.url, { path: '/v1/payment_intents', key: 'k-bad', form });
        expect({ status: res.status, body: res.json() }).toEqual({
          status: 400,
          body: { error: { type: 'invalid_request_error', message: expect.any(String), ...error } },
        });
      }
      expect(await listIntents(sim.url)).toHaveLength(0);
      expect((await call(sim.url, { path: '/v1/payment_intents', key: 'k-bad', form: VISA })).status).toBe(200);
    });

    it('answers 404 for an unknown intent, route, and 405 for a wrong method', async () => {
      const sim = await start();
      const missing = await call(sim.url, { path: '/v1/payment_intents/pi_nope' });
      expect(missing.status).toBe(404);
      expect(missing.json()).toEqual({
        error: { type: 'invalid_request_error', code: 'resource_missing', param: 'id', message: "No such payment_intent: 'pi_nope'" },
      });
      const route = await call(sim.url, { path: '/v1/customers' });
      expect(route.status).toBe(404);
      expect(route.json()).toMatchObject({ error: { type: 'invalid_request_error' } });
      expect((await call(sim.url, { method: 'DELETE', path: '/v1/payment_intents' })).status).toBe(405);
    });
  });

  describe('retrieve of an unknown object through the stripe SDK', () => {
    it('raises StripeInvalidRequestError 404 resource_missing for a payment intent or refund the account does not know', async () => {
      const sim = await start();
      const stripe = stripeClient(sim, { maxNetworkRetries: 2 });
      const theirs = (await call(sim.url, { path: '/v1/payment_intents', form: VISA, secret: OTHER_SECRET })).json().id as string;
      const theirRefund = (await call(sim.url, { path: '/v1/refunds', form: { payment_intent: theirs }, secret: OTHER_SECRET })).json().id as string;
      const cases: [string, () => Promise<unknown>, string][] = [
        ['payment_intent', () => stripe.paymentIntents.retrieve('pi_nope'), "No such payment_intent: 'pi_nope'"],
        ['payment_intent', () => stripe.paymentIntents.retrieve(theirs), `No such payment_intent: '${theirs}'`],
        ['refund', () => stripe.refunds.retrieve('re_nope'), "No such refund: 're_nope'"],
        ['refund', () => stripe.refunds.retrieve(theirRefund), `No such refund: '${theirRefund}'`],
      ];
      for (const [kind, retrieve, message] of cases) {
        const error = (await retrieve().catch((e: unknown) => e)) as Stripe.errors.StripeInvalidRequestError;
        expect(error).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
        expect({ kind, status: error.statusCode, type: error.type, code: error.code, param: error.param, message: error.message }).toEqual({
          kind,
          status: 404,
          type: 'StripeInvalidRequestError',
          code: 'resource_missing',
          param: 'id',
          message,
        });
      }
    });
  });

  describe('lists', () => {
    it('lists payment intents newest first with limit, starting_after and has_more', async () => {
      const sim = await start();
      const ids: string[] = [];
      for (let i = 1; i <= 5; i++) {
        ids.push((await call(sim.url, { path: '/v1/payment_intents', form: { ...VISA, amount: 100 * i } })).json().id as string);
      }
      const newest = [...ids].reverse();
      const all = await call(sim.url, { path: '/v1/payment_intents' });
      expect(all.json<ListBody>()).toEqual({ object: 'list', url: '/v1/payment_intents', data: expect.any(Array), has_more: false });
      expect(all.json<ListBody>().data.map((i) => i.id)).toEqual(newest);

      const seen: string[] = [];
      const pages: boolean[] = [];
      let after: string | undefined;
      for (;;) {
        const path = `/v1/payment_intents?limit=2${after ? `&starting_after=${after}` : ''}`;
        const page = (await call(sim.url, { path })).json<ListBody<{ id: string }>>();
        seen.push(...page.data.map((i) => i.id));
        pages.push(page.has_more);
        if (!page.has_more) break;
        after = page.data.at(-1)!.id;
      }
      expect(seen).toEqual(newest);
      expect(pages).toEqual([true, true, false]);
      // An exact last page says there is no more.
      const exact = (await call(sim.url, { path: `/v1/payment_intents?limit=2&starting_after=${newest[2]}` })).json<ListBody>();
      expect(exact.data.map((i) => i.id)).toEqual(newest.slice(3));
      expect(exact.has_more).toBe(false);
    });

    it('refuses a bad limit, an unknown cursor and an unknown query parameter', async () => {
      const sim = await start();
      for (const [query, param, code] of [
        ['limit=0', 'limit', 'parameter_invalid_integer'],
        ['limit=101', 'limit', 'parameter_invalid_integer'],
        ['limit=ten', 'limit', 'parameter_invalid_integer'],
        ['starting_after=pi_unknown', 'starting_after', 'resource_missing'],
        ['sort=asc', 'sort', 'parameter_unknown'],
      ]) {
        const res = await call(sim.url, { path: `/v1/payment_intents?${query}` });
        expect({ query, status: res.status, body: res.json() }).toEqual({
          query,
          status: 400,
          body: { error: { type: 'invalid_request_error', code, param, message: expect.any(String) } },
        });
      }
    });
  });

  describe('accounts', () => {
    it('keeps ledgers and Idempotency-Keys apart per secret key', async () => {
      const sim = await start();
      const mine = (await call(sim.url, { path: '/v1/payment_intents', key: 'shared-key', form: VISA })).json();
      const theirs = await call(sim.url, { path: '/v1/payment_intents', key: 'shared-key', secret: OTHER_SECRET, form: { ...VISA, amount: 500 } });
      expect(theirs.status).toBe(200);
      expect(theirs.headers['idempotent-replayed']).toBeUndefined();
      expect(theirs.json().id).not.toBe(mine.id);
      expect((await call(sim.url, { path: `/v1/payment_intents/${mine.id as string}`, secret: OTHER_SECRET })).status).toBe(404);
      expect((await listIntents(sim.url)).map((i) => i.id)).toEqual([mine.id]);
      expect((await listIntents(sim.url, OTHER_SECRET)).map((i) => i.id)).toEqual([theirs.json().id]);
      const refund = await call(sim.url, { path: '/v1/refunds', secret: OTHER_SECRET, form: { payment_intent: mine.id as string } });
      expect(refund.json()).toMatchObject({ error: { code: 'resource_missing' } });
    });
  });
});
