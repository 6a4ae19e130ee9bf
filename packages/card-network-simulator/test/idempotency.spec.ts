import Stripe from 'stripe';
import { call, createUnconfirmed, eventTypes, listIntents, simulators, stripeClient, VISA, waitFor } from './support';

/**
 * Stripe's Idempotency-Key rules on every POST, /confirm included: the effect on
 * arrival and the answer `delayMs` later, replays byte for byte, other parameters
 * refused, 409 while in flight, the key forgotten after the key window.
 */
describe('card network simulator: timing and Idempotency-Key', () => {
  const start = simulators();

  describe('timing', () => {
    it('records the charge when the request arrives; the answer comes delayMs later', async () => {
      const sim = await start({ delayMs: 300 });
      let answered = false;
      const t0 = performance.now();
      const pending = call(sim.url, { path: '/v1/payment_intents', form: VISA }).then((res) => {
        answered = true;
        return res;
      });
      const listed = await waitFor(async () => {
        const data = await listIntents(sim.url);
        return data.length === 1 ? data[0] : undefined;
      });
      expect(answered).toBe(false);
      expect(listed.status).toBe('succeeded');
      const res = await pending;
      expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
      expect(res.json().id).toBe(listed.id);
    });

    it('a caller that disconnects during the delay still gets its charge saved under the key', async () => {
      const sim = await start({ delayMs: 300 });
      const abort = new AbortController();
      const first = call(sim.url, { path: '/v1/payment_intents', key: 'k-gone', form: VISA, signal: abort.signal });
      const [charged] = await waitFor(async () => {
        const data = await listIntents(sim.url);
        return data.length === 1 ? data : undefined;
      });
      abort.abort();
      await expect(first).rejects.toThrow();
      // While the first is still in its delay the key is in use; afterwards it replays.
      const retry = await waitFor(async () => {
        const res = await call(sim.url, { path: '/v1/payment_intents', key: 'k-gone', form: VISA });
        return res.status === 409 ? undefined : res;
      });
      expect(retry.status).toBe(200);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.json().id).toBe(charged.id);
      expect(await listIntents(sim.url)).toHaveLength(1);
    });
  });

  describe('Idempotency-Key', () => {
    it('replays the saved answer byte for byte, without the delay, whatever the parameter order', async () => {
      const sim = await start({ delayMs: 1_000 });
      const form = { ...VISA, 'metadata[a]': '1', 'metadata[b]': '2' };
      const first = await call(sim.url, { path: '/v1/payment_intents', key: 'k-replay', form });
      expect(first.status).toBe(200);
      expect(first.headers['idempotency-key']).toBe('k-replay');
      expect(first.headers['idempotent-replayed']).toBeUndefined();

      const reversed = Object.entries(form).map(([k, v]) => [k, String(v)] as [string, string]).reverse();
      // Without the delay: the replay answers before a new request sent just before it, which waits delayMs.
      let fresh = false;
      const newRequest = call(sim.url, { path: '/v1/payment_intents', key: 'k-fresh', form: VISA }).then((res) => ((fresh = true), res));
      const replay = await call(sim.url, { path: '/v1/payment_intents', key: 'k-replay', form: reversed });
      expect(fresh).toBe(false);
      expect((await newRequest).status).toBe(200);
      expect(replay.status).toBe(200);
      expect(replay.text).toBe(first.text);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.headers['idempotency-key']).toBe('k-replay');
      expect(replay.headers['request-id']).not.toBe(first.headers['request-id']);
      // The first request's intent and the new request's: the replay charged nothing.
      expect(await listIntents(sim.url)).toHaveLength(2);
    });

    it('replays a 402 decline too', async () => {
      const sim = await start();
      const form = { ...VISA, payment_method: 'pm_card_chargeDeclined' };
      const first = await call(sim.url, { path: '/v1/payment_intents', key: 'k-402', form });
      const replay = await call(sim.url, { path: '/v1/payment_intents', key: 'k-402', form });
      expect(first.status).toBe(402);
      expect(replay.status).toBe(402);
      expect(replay.text).toBe(first.text);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(await listIntents(sim.url)).toHaveLength(1);
    });

    it('refuses the same key with other parameters (400 idempotency_error)', async () => {
      const sim = await start();
      await call(sim.url, { path: '/v1/payment_intents', key: 'k-mismatch', form: VISA });
      const other = await call(sim.url, { path: '/v1/payment_intents', key: 'k-mismatch', form: { ...VISA, amount: 1001 } });
      expect(other.status).toBe(400);
      expect(other.json()).toEqual({
        error: {
          type: 'idempotency_error',
          message:
            "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than 'k-mismatch' if you meant to execute a different request.",
        },
      });
      const otherPath = await call(sim.url, { path: '/v1/refunds', key: 'k-mismatch', form: { payment_intent: 'pi_x' } });
      expect(otherPath.json()).toMatchObject({ error: { type: 'idempotency_error' } });
      expect(await listIntents(sim.url)).toHaveLength(1);
    });

    it('answers 409 idempotency_key_in_use while the first request is in flight', async () => {
      const sim = await start({ delayMs: 300 });
      const first = call(sim.url, { path: '/v1/payment_intents', key: 'k-busy', form: VISA });
      await waitFor(async () => (await listIntents(sim.url)).length === 1);
      const second = await call(sim.url, { path: '/v1/payment_intents', key: 'k-busy', form: VISA });
      expect(second.status).toBe(409);
      expect(second.json()).toEqual({
        error: {
          type: 'idempotency_error',
          code: 'idempotency_key_in_use',
          message:
            'There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): k-busy. Please try again later.',
        },
      });
      expect((await first).status).toBe(200);
      const third = await call(sim.url, { path: '/v1/payment_intents', key: 'k-busy', form: VISA });
      expect(third.headers['idempotent-replayed']).toBe('true');
      expect(await listIntents(sim.url)).toHaveLength(1);
    });

    it('forgets a key after idempotencyTtlMs: then it may be used with other parameters', async () => {
      const ttl = 250;
      const sim = await start({ idempotencyTtlMs: ttl });
      const first = await call(sim.url, { path: '/v1/payment_intents', key: 'k-ttl', form: VISA });
      // The key's window counts from its answer, which came before this.
      const answered = performance.now();
      expect(first.status).toBe(200);
      expect((await call(sim.url, { path: '/v1/payment_intents', key: 'k-ttl', form: { ...VISA, amount: 2000 } })).status).toBe(400);
      // Expiry is checked on lookup, not left to the periodic sweep (every second here): the
      // first call once the window has passed is already a new one.
      await new Promise((r) => setTimeout(r, Math.max(0, answered + ttl + 5 - performance.now())));
      const later = await call(sim.url, { path: '/v1/payment_intents', key: 'k-ttl', form: { ...VISA, amount: 2000 } });
      expect(later.status).toBe(200);
      expect(later.headers['idempotent-replayed']).toBeUndefined();
      expect(later.json()).toMatchObject({ amount: 2000 });
      expect(later.json().id).not.toBe(first.json().id);
      expect(await listIntents(sim.url)).toHaveLength(2);
    });

    it('runs every POST without a key; refuses a key longer than 255 characters', async () => {
      const sim = await start();
      await call(sim.url, { path: '/v1/payment_intents', form: VISA });
      await call(sim.url, { path: '/v1/payment_intents', form: VISA });
      expect(await listIntents(sim.url)).toHaveLength(2);
      const long = await call(sim.url, { path: '/v1/payment_intents', key: 'k'.repeat(256), form: VISA });
      expect(long.status).toBe(400);
      expect((await call(sim.url, { path: '/v1/payment_intents', key: 'k'.repeat(255), form: VISA })).status).toBe(200);
    });
  });

  describe('Idempotency-Key on /confirm', () => {
    it('replays byte for byte; refuses other parameters or another intent under the same key', async () => {
      const sim = await start({ delayMs: 1_000 });
      const stripe = stripeClient(sim);
      const a = await createUnconfirmed(stripe, 'pm_card_visa');
      const b = await createUnconfirmed(stripe, 'pm_card_visa');
      const path = `/v1/payment_intents/${a.id}/confirm`;
      const first = await call(sim.url, { path, key: 'k-confirm', form: { error_on_requires_action: 'true' } });
      expect(first.status).toBe(200);
      // Not executed again, nor waited on: the replay answers before a new request sent
      // just before it, which is answered delayMs after its arrival.
      let fresh = false;
      const newRequest = call(sim.url, { path: '/v1/payment_intents', key: 'k-fresh', form: VISA }).then((res) => ((fresh = true), res));
      const replay = await call(sim.url, { path, key: 'k-confirm', form: { error_on_requires_action: 'true' } });
      expect(fresh).toBe(false);
      expect((await newRequest).status).toBe(200);
      expect(replay.text).toBe(first.text);
      expect(replay.headers['idempotent-replayed']).toBe('true');

      const other = await call(sim.url, { path, key: 'k-confirm', form: { error_on_requires_action: 'false' } });
      expect(other.status).toBe(400);
      expect(other.json()).toMatchObject({ error: { type: 'idempotency_error' } });
      const otherIntent = await call(sim.url, { path: `/v1/payment_intents/${b.id}/confirm`, key: 'k-confirm', form: { error_on_requires_action: 'true' } });
      expect(otherIntent.json()).toMatchObject({ error: { type: 'idempotency_error' } });
      expect((await stripe.paymentIntents.retrieve(b.id)).status).toBe('requires_confirmation');
    });

    it('answers 409 while the first confirm is in flight', async () => {
      const sim = await start({ delayMs: 300 });
      const stripe = stripeClient(sim);
      const intent = await createUnconfirmed(stripe, 'pm_card_visa');
      const path = `/v1/payment_intents/${intent.id}/confirm`;
      const first = call(sim.url, { path, key: 'k-busy', form: {} });
      await waitFor(async () => (await stripe.paymentIntents.retrieve(intent.id)).status === 'succeeded');
      const second = await call(sim.url, { path, key: 'k-busy', form: {} });
      expect(second.status).toBe(409);
      expect(second.json()).toMatchObject({ error: { code: 'idempotency_key_in_use' } });
      expect((await first).status).toBe(200);
    });

    it('after the key window, the same confirm is refused 400 payment_intent_unexpected_state: never a second charge', async () => {
      const sim = await start({ idempotencyTtlMs: 200 });
      const stripe = stripeClient(sim, { maxNetworkRetries: 2 });
      const intent = await createUnconfirmed(stripe, 'pm_card_visa');
      const confirm = () => stripe.paymentIntents.confirm(intent.id, { error_on_requires_action: true }, { idempotencyKey: 'k-window' });
      const first = await confirm();
      expect(first.status).toBe('succeeded');
      const refused = await waitFor(async () => {
        const outcome = await confirm().catch((e: unknown) => e);
        return outcome instanceof Stripe.errors.StripeError ? outcome : undefined;
      });
      expect(refused).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
      expect({ status: refused.statusCode, code: refused.code, message: refused.message }).toEqual({
        status: 400,
        code: 'payment_intent_unexpected_state',
        message: 'You cannot confirm this PaymentIntent because it has already succeeded after being previously confirmed.',
      });
      expect(refused.payment_intent).toMatchObject({ id: intent.id, status: 'succeeded', latest_charge: first.latest_charge });
      expect(await stripe.paymentIntents.retrieve(intent.id)).toMatchObject({ amount_received: 1000, latest_charge: first.latest_charge });
      expect(await eventTypes(sim)).toEqual(['payment_intent.succeeded']);
    });

    it('takes queued faults, and is held and released like the other POSTs', async () => {
      const sim = await start();
      const stripe = stripeClient(sim);
      const intent = await createUnconfirmed(stripe, 'pm_card_visa');
      const path = `/v1/payment_intents/${intent.id}/confirm`;
      await call(sim.url, { path: '/_simulator/hold', form: {} });
      const held = call(sim.url, { path, key: 'k-held', form: {} });
      await waitFor(async () => (await call(sim.url, { path: '/_simulator/stats' })).json<{ held: number }>().held === 1);
      expect((await stripe.paymentIntents.retrieve(intent.id)).status).toBe('requires_confirmation');
      await call(sim.url, { path: '/_simulator/faults', json: { fault: 'error' } });
      await call(sim.url, { path: '/_simulator/release', form: {} });
      expect((await held).status).toBe(500);
      expect((await stripe.paymentIntents.retrieve(intent.id)).status).toBe('succeeded');
      const replay = await call(sim.url, { path, key: 'k-held', form: {} });
      expect(replay.status).toBe(200);
      expect(replay.headers['idempotent-replayed']).toBe('true');
    });
  });
});
