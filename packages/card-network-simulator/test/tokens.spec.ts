import Stripe from 'stripe';
import { RunningSimulator } from '../src';
import { call, ListBody, listIntents, simulators, stripeClient } from './support';

/**
 * Card tokens as Stripe.js makes them (POST /v1/tokens), and paying with one
 * through PaymentIntent create's `payment_method_data[card][token]`: each test
 * number behaves as Stripe's, a token pays once, the number is never echoed.
 */
describe('card network simulator: card tokens', () => {
  const start = simulators();
  const TOKEN_PARAM = 'payment_method_data[card][token]';
  const card = (number: string, extra: Record<string, string> = {}) => ({
    'card[number]': number,
    'card[exp_month]': '12',
    'card[exp_year]': '2040',
    'card[cvc]': '123',
    ...extra,
  });
  const tokenize = (sim: RunningSimulator, form: Record<string, string>, key?: string) => call(sim.url, { path: '/v1/tokens', form, key });
  async function newToken(sim: RunningSimulator, number: string): Promise<string> {
    const res = await tokenize(sim, card(number));
    expect(res.status).toBe(200);
    return res.json().id as string;
  }
  const payForm = (token: string, extra: Record<string, string | number> = {}) => ({
    amount: 1000,
    currency: 'usd',
    confirm: 'true',
    'payment_method_data[type]': 'card',
    [TOKEN_PARAM]: token,
    ...extra,
  });
  const pay = (sim: RunningSimulator, token: string, extra: Record<string, string | number> = {}, key?: string) =>
    call(sim.url, { path: '/v1/payment_intents', form: payForm(token, extra), key });

  describe('POST /v1/tokens', () => {
    it('makes a tok_1... token that shows only the last four digits; GET tells it', async () => {
      const sim = await start();
      const res = await tokenize(sim, card('4242424242424242'), 'k-token');
      expect(res.status).toBe(200);
      expect(res.json()).toEqual({
        id: expect.stringMatching(/^tok_1[A-Za-z0-9]{23}$/),
        object: 'token',
        card: {
          id: expect.stringMatching(/^card_1[A-Za-z0-9]{23}$/),
          object: 'card',
          brand: 'Visa',
          country: 'US',
          cvc_check: 'unchecked',
          exp_month: 12,
          exp_year: 2040,
          funding: 'credit',
          last4: '4242',
          metadata: {},
          name: null,
        },
        client_ip: null,
        created: expect.any(Number),
        livemode: false,
        type: 'card',
        used: false,
      });
      expect(res.text).not.toContain('4242424242424242');
      const fetched = await call(sim.url, { path: `/v1/tokens/${res.json().id as string}` });
      expect(fetched.json()).toEqual(res.json());
      // Keyed like every POST: the replay is the same token, not a second one.
      const replay = await tokenize(sim, card('4242424242424242'), 'k-token');
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(res.text);
    });

    it.each([
      ['5555555555554444', 'MasterCard', '4444'],
      ['378282246310005', 'American Express', '0005'],
      ['6011111111111117', 'Discover', '1117'],
      ['4000 0000 0000 0002', 'Visa', '0002'],
    ])('%s: brand %s, last4 %s', async (number, brand, last4) => {
      const sim = await start();
      const res = await tokenize(sim, card(number, { 'card[exp_year]': '40' }));
      expect(res.json()).toMatchObject({ card: { brand, last4, exp_year: 2040 } });
    });

    it.each([
      ['a number that fails the Luhn check', { 'card[number]': '4242424242424241' }, 'incorrect_number', 'number'],
      ['a number too short', { 'card[number]': '424242424242' }, 'incorrect_number', 'number'],
      ['a number with letters', { 'card[number]': '4242x42424242424' }, 'incorrect_number', 'number'],
      ['month 13', { 'card[exp_month]': '13' }, 'invalid_expiry_month', 'exp_month'],
      ['a past year', { 'card[exp_year]': '2001' }, 'invalid_expiry_year', 'exp_year'],
      ['a CVC of letters', { 'card[cvc]': 'abc' }, 'invalid_cvc', 'cvc'],
    ])('refuses %s: 402 card_error, saved under the key, number not echoed', async (_, extra, code, param) => {
      const sim = await start();
      const form = { ...card('4242424242424242'), ...extra };
      const res = await tokenize(sim, form, 'k-card');
      expect(res.status).toBe(402);
      expect(res.headers['stripe-should-retry']).toBe('false');
      expect(res.json()).toEqual({ error: { type: 'card_error', code, param, message: expect.any(String) } });
      expect(res.text).not.toContain(form['card[number]']);
      const replay = await tokenize(sim, form, 'k-card');
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(res.text);
    });

    it('refuses a missing field or an unknown parameter with 400, keeping nothing; 404 for an unknown token, 405 for other methods', async () => {
      const sim = await start();
      const missing = await tokenize(sim, { 'card[exp_month]': '12', 'card[exp_year]': '2040' }, 'k-missing');
      expect(missing.json()).toEqual({
        error: { type: 'invalid_request_error', code: 'parameter_missing', param: 'card[number]', message: 'Missing required param: card[number].' },
      });
      expect((await tokenize(sim, card('', {}), 'k-missing')).json()).toMatchObject({ error: { code: 'parameter_invalid_empty', param: 'card[number]' } });
      expect((await tokenize(sim, card('4242424242424242', { 'card[name]': 'A' }))).json()).toMatchObject({
        error: { code: 'parameter_unknown', param: 'card[name]' },
      });
      // The key was left free.
      expect((await tokenize(sim, card('4242424242424242'), 'k-missing')).status).toBe(200);
      const unknown = await call(sim.url, { path: '/v1/tokens/tok_1nope' });
      expect(unknown.status).toBe(404);
      expect(unknown.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'resource_missing', message: "No such token: 'tok_1nope'" } });
      expect((await call(sim.url, { path: '/v1/tokens' })).status).toBe(405);
      expect((await call(sim.url, { method: 'DELETE', path: '/v1/tokens/tok_1nope' })).status).toBe(405);
    });
  });

  describe('paying with a token: payment_method_data[card][token]', () => {
    it.each([
      ['4242424242424242', 200, { status: 'succeeded', amount_received: 1000 }],
      ['6011111111111117', 200, { status: 'succeeded' }],
      ['4000000000000002', 402, { error: { code: 'card_declined', decline_code: 'generic_decline' } }],
      ['4000000000009995', 402, { error: { code: 'card_declined', decline_code: 'insufficient_funds' } }],
      ['4000000000000119', 402, { error: { code: 'processing_error' } }],
      ['4000002500003155', 402, { error: { code: 'authentication_required' } }],
    ])('%s: %d', async (number, status, body) => {
      const sim = await start();
      const token = await newToken(sim, number);
      const res = await pay(sim, token, { error_on_requires_action: 'true' });
      expect(res.status).toBe(status);
      expect(res.json()).toMatchObject(body);
      const [intent] = await listIntents(sim.url);
      expect(intent.payment_method).toMatch(/^pm_1[A-Za-z0-9]{23}$/);
      expect((await call(sim.url, { path: `/v1/tokens/${token}` })).json()).toMatchObject({ used: true });
    });

    it('through the stripe SDK: token, unconfirmed intent, confirm by id (the app\'s two steps)', async () => {
      const sim = await start();
      const stripe = stripeClient(sim);
      const token = await stripe.tokens.create({ card: { number: '4000002500003155', exp_month: '12', exp_year: '2040', cvc: '123' } });
      expect(token).toMatchObject({ id: expect.stringMatching(/^tok_1/), used: false, card: { last4: '3155' } });
      const created = await stripe.paymentIntents.create(
        {
          amount: 1000,
          currency: 'usd',
          // The SDK's types list no `card` under payment_method_data; Stripe documents it for tokens.
          payment_method_data: { type: 'card', card: { token: token.id } } as never,
          automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
        },
        { idempotencyKey: 'create-with-token' },
      );
      expect(created).toMatchObject({ status: 'requires_confirmation', payment_method: expect.stringMatching(/^pm_1/) });
      // A retry of the create replays it: the spent token is not looked at again.
      const replayed = await stripe.paymentIntents.create(
        { amount: 1000, currency: 'usd', payment_method_data: { type: 'card', card: { token: token.id } } as never, automatic_payment_methods: { enabled: true, allow_redirects: 'never' } },
        { idempotencyKey: 'create-with-token' },
      );
      expect(replayed.id).toBe(created.id);
      expect(replayed.lastResponse.headers['idempotent-replayed']).toBe('true');
      // The card behaves as its number says when the intent is confirmed.
      const error = (await stripe.paymentIntents.confirm(created.id, { error_on_requires_action: true }).catch((e: unknown) => e)) as Stripe.errors.StripeCardError;
      expect(error).toBeInstanceOf(Stripe.errors.StripeCardError);
      expect(error.code).toBe('authentication_required');
      // Another card on the same intent, by test method name.
      const paid = await stripe.paymentIntents.confirm(created.id, { payment_method: 'pm_card_visa', error_on_requires_action: true });
      expect(paid).toMatchObject({ status: 'succeeded', amount_received: 1000 });
    });

    it('a token pays once: the second use is refused with token_already_used; nothing is created', async () => {
      const sim = await start();
      const token = await newToken(sim, '4242424242424242');
      expect((await pay(sim, token)).status).toBe(200);
      const again = await pay(sim, token, {}, 'k-again');
      expect(again.status).toBe(400);
      expect(again.json()).toEqual({
        error: { type: 'invalid_request_error', code: 'token_already_used', param: TOKEN_PARAM, message: `You cannot use a Stripe token more than once: ${token}.` },
      });
      expect(await listIntents(sim.url)).toHaveLength(1);
      // Through the SDK the refusal is a StripeInvalidRequestError naming the param.
      const stripe = stripeClient(sim);
      const error = (await stripe.paymentIntents
        .create({ amount: 1000, currency: 'usd', payment_method_data: { type: 'card', card: { token } } as never })
        .catch((e: unknown) => e)) as Stripe.errors.StripeInvalidRequestError;
      expect(error).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
      expect({ status: error.statusCode, code: error.code, param: error.param }).toEqual({ status: 400, code: 'token_already_used', param: TOKEN_PARAM });
    });

    it('an unknown token: 400 resource_missing with param payment_method_data[card][token]', async () => {
      const sim = await start();
      const res = await pay(sim, 'tok_1UnknownUnknownUnknown00');
      expect(res.json()).toEqual({
        error: { type: 'invalid_request_error', code: 'resource_missing', param: TOKEN_PARAM, message: "No such token: 'tok_1UnknownUnknownUnknown00'" },
      });
      expect(await listIntents(sim.url)).toHaveLength(0);
    });

    it('a refused create does not spend the token', async () => {
      const sim = await start();
      const token = await newToken(sim, '4242424242424242');
      expect((await pay(sim, token, { amount: 10 })).json()).toMatchObject({ error: { code: 'amount_too_small' } });
      expect((await pay(sim, token, { currency: 'xyz' })).json()).toMatchObject({ error: { param: 'currency' } });
      await call(sim.url, { path: '/_simulator/faults', json: { fault: 'saved_error' } });
      expect((await pay(sim, token, {}, 'k-saved')).status).toBe(500);
      expect((await call(sim.url, { path: `/v1/tokens/${token}` })).json()).toMatchObject({ used: false });
      expect((await pay(sim, token)).json()).toMatchObject({ status: 'succeeded' });
    });

    it("Stripe's fixed test tokens (tok_visa, tok_chargeDeclined) stand for a new token on every use", async () => {
      const sim = await start();
      expect((await pay(sim, 'tok_visa')).json()).toMatchObject({ status: 'succeeded' });
      expect((await pay(sim, 'tok_visa')).json()).toMatchObject({ status: 'succeeded' });
      expect((await pay(sim, 'tok_chargeDeclined')).json()).toMatchObject({ error: { code: 'card_declined' } });
      expect((await pay(sim, 'tok_toString')).json()).toMatchObject({ error: { code: 'resource_missing', param: TOKEN_PARAM } });
      const ids = (await listIntents(sim.url)).map((i) => i.payment_method as string);
      expect(new Set(ids).size).toBe(3);
    });

    it('refuses payment_method with payment_method_data, another type, or no token', async () => {
      const sim = await start();
      const token = await newToken(sim, '4242424242424242');
      const cases: [Record<string, string | number>, Record<string, unknown>][] = [
        [{ ...payForm(token), payment_method: 'pm_card_visa' }, { code: 'parameters_exclusive', param: 'payment_method_data' }],
        [{ ...payForm(token), 'payment_method_data[type]': 'sepa_debit' }, { param: 'payment_method_data[type]' }],
        [{ amount: 1000, currency: 'usd', [TOKEN_PARAM]: token }, { code: 'parameter_missing', param: 'payment_method_data[type]' }],
        [{ amount: 1000, currency: 'usd', 'payment_method_data[type]': 'card' }, { code: 'parameter_missing', param: TOKEN_PARAM }],
        [{ ...payForm(token), 'payment_method_data[card][number]': '4242424242424242' }, { code: 'parameter_unknown', param: 'payment_method_data[card][number]' }],
      ];
      for (const [form, error] of cases) {
        const res = await call(sim.url, { path: '/v1/payment_intents', form });
        expect({ status: res.status, body: res.json() }).toEqual({
          status: 400,
          body: { error: { type: 'invalid_request_error', message: expect.any(String), ...error } },
        });
        expect(res.text).not.toContain('4242424242424242');
      }
      expect(await listIntents(sim.url)).toHaveLength(0);
      expect((await call(sim.url, { path: `/v1/tokens/${token}` })).json()).toMatchObject({ used: false });
    });

    it('an intent paid by token lists and retrieves with its pm_..., and refunds', async () => {
      const sim = await start();
      const token = await newToken(sim, '5555555555554444');
      const paid = (await pay(sim, token)).json();
      const fetched = await call(sim.url, { path: `/v1/payment_intents/${paid.id as string}` });
      expect(fetched.json()).toEqual(paid);
      const refund = await call(sim.url, { path: '/v1/refunds', form: { payment_intent: paid.id as string } });
      expect(refund.json()).toMatchObject({ status: 'succeeded', amount: 1000 });
      expect((await call(sim.url, { path: '/v1/events' })).json<ListBody<{ type: string }>>().data.map((e) => e.type)).toEqual([
        'refund.created',
        'payment_intent.succeeded',
      ]);
    });
  });
});
