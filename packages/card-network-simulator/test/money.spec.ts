import Stripe from 'stripe';
import { STRIPE_CURRENCIES } from '../src/currencies';
import { call, listIntents, simulators, stripeClient, VISA } from './support';

/** PaymentIntent create refuses, as Stripe does, a currency it does not support and an amount below the currency's minimum. */
describe('card network simulator: currencies and minimum amounts', () => {
  const start = simulators();

  const SUPPORTED = ['usd', ...[...STRIPE_CURRENCIES].filter((c) => c !== 'usd').sort()].join(', ');
  const create = (url: string, form: Record<string, string | number>, key?: string) => call(url, { path: '/v1/payment_intents', form, key });

  describe('currency', () => {
    it.each(['xyz', 'ZWG', 'dollars', 'bgn'])('refuses %s: 400 invalid_request_error, param currency, no code; nothing recorded, the key stays free', async (currency) => {
      const sim = await start();
      const res = await create(sim.url, { ...VISA, currency }, 'k-currency');
      expect(res.status).toBe(400);
      expect(res.json()).toEqual({
        error: {
          type: 'invalid_request_error',
          param: 'currency',
          message: `Invalid currency: ${currency.toLowerCase()}. Stripe currently supports these currencies: ${SUPPORTED}`,
        },
      });
      expect(res.json<{ error: { message: string } }>().error.message).toMatch(/currencies: usd, aed, afn, .*, zmw$/);
      expect(await listIntents(sim.url)).toHaveLength(0);
      const valid = await create(sim.url, VISA, 'k-currency');
      expect(valid.status).toBe(200);
      expect(valid.headers['idempotent-replayed']).toBeUndefined();
    });

    it.each(['usd', 'EUR', 'jpy', 'sle', 'xcg', 'Chf'])('accepts %s, stored lower-case', async (currency) => {
      const sim = await start();
      const res = await create(sim.url, { ...VISA, currency });
      expect(res.status).toBe(200);
      expect(res.json()).toMatchObject({ currency: currency.toLowerCase(), status: 'succeeded' });
    });
  });

  describe('minimum amount', () => {
    it.each([
      ['usd', 50, '$0.50 usd'],
      ['USD', 50, '$0.50 usd'],
      ['eur', 50, '€0.50 eur'],
      ['gbp', 30, '£0.30 gbp'],
      ['jpy', 50, '¥50 jpy'],
      ['czk', 1500, '15.00 czk'],
      ['huf', 17500, '175.00 huf'],
      ['mxn', 1000, '10.00 mxn'],
    ])('%s: %d is charged, one less is refused with amount_too_small naming %s', async (currency, minimum, shown) => {
      const sim = await start();
      const below = await create(sim.url, { ...VISA, currency, amount: minimum - 1 }, 'k-min');
      expect(below.status).toBe(400);
      expect(below.json()).toEqual({
        error: { type: 'invalid_request_error', code: 'amount_too_small', param: 'amount', message: `Amount must be at least ${shown}` },
      });
      expect(await listIntents(sim.url)).toHaveLength(0);
      // Not saved under the key: the same key then charges the minimum.
      const at = await create(sim.url, { ...VISA, currency, amount: minimum }, 'k-min');
      expect(at.status).toBe(200);
      expect(at.headers['idempotent-replayed']).toBeUndefined();
      expect(at.json()).toMatchObject({ amount: minimum, amount_received: minimum, status: 'succeeded' });
    });

    it('a currency without a minimum of its own charges 1; 0 is refused as below 1', async () => {
      const sim = await start();
      expect((await create(sim.url, { ...VISA, currency: 'kes', amount: 1 })).json()).toMatchObject({ amount: 1, currency: 'kes', status: 'succeeded' });
      expect((await create(sim.url, { ...VISA, currency: 'kes', amount: 0 })).json()).toMatchObject({ error: { code: 'amount_too_small', param: 'amount' } });
    });

    it('applies to unconfirmed intents too; a refused create leaves no event', async () => {
      const sim = await start();
      const res = await create(sim.url, { amount: 49, currency: 'usd', payment_method: 'pm_card_visa' });
      expect(res.json()).toMatchObject({ error: { code: 'amount_too_small' } });
      expect((await call(sim.url, { path: '/v1/events' })).json<{ data: unknown[] }>().data).toHaveLength(0);
    });

    it('does not use up a queued fault', async () => {
      const sim = await start();
      await call(sim.url, { path: '/_simulator/faults', json: { fault: 'saved_error' } });
      expect((await create(sim.url, { ...VISA, amount: 49 }, 'k-fault')).status).toBe(400);
      expect((await call(sim.url, { path: '/_simulator/stats' })).json()).toMatchObject({ pending_faults: 1 });
    });
  });

  describe('through the stripe SDK', () => {
    it('raises StripeInvalidRequestError with the param and code, and does not retry it', async () => {
      const sim = await start();
      const stripe = stripeClient(sim, { maxNetworkRetries: 2 });
      const small = (await stripe.paymentIntents
        .create({ amount: 49, currency: 'usd', payment_method: 'pm_card_visa', confirm: true }, { idempotencyKey: 'sdk-min' })
        .catch((e: unknown) => e)) as Stripe.errors.StripeInvalidRequestError;
      expect(small).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
      expect({ status: small.statusCode, code: small.code, param: small.param, message: small.message }).toEqual({
        status: 400,
        code: 'amount_too_small',
        param: 'amount',
        message: 'Amount must be at least $0.50 usd',
      });
      const currency = (await stripe.paymentIntents
        .create({ amount: 1000, currency: 'xyz', payment_method: 'pm_card_visa' })
        .catch((e: unknown) => e)) as Stripe.errors.StripeInvalidRequestError;
      expect(currency).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
      expect({ status: currency.statusCode, code: currency.code, param: currency.param }).toEqual({ status: 400, code: undefined, param: 'currency' });
      expect(await listIntents(sim.url)).toHaveLength(0);
    });
  });
});
