import Stripe from 'stripe';
import { call, listIntents, OTHER_SECRET, simulators, stripeClient, VISA, waitFor } from './support';

/** Lost answers, held requests and shutdown: what a payment client must survive. */
describe('card network simulator: faults', () => {
  const start = simulators();

  const stats = async (url: string, secret?: string) =>
    (await call(url, { path: '/_simulator/stats', secret })).json<{ held: number; holding: boolean; pending_faults: number }>();

  describe('fault payment methods lose the first answer; the key replays the charge', () => {
    it('pm_card_chargeThenDrop: the socket is destroyed, the intent is in the ledger, a retry replays it', async () => {
      const sim = await start({ delayMs: 20 });
      const form = { ...VISA, payment_method: 'pm_card_chargeThenDrop' };
      await expect(call(sim.url, { path: '/v1/payment_intents', key: 'k-drop', form })).rejects.toThrow(/socket hang up|ECONNRESET/);
      const [charged] = await listIntents(sim.url);
      expect(charged).toMatchObject({ status: 'succeeded', payment_method: 'pm_card_chargeThenDrop' });
      const retry = await call(sim.url, { path: '/v1/payment_intents', key: 'k-drop', form });
      expect(retry.status).toBe(200);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.json()).toEqual(charged);
      expect(await listIntents(sim.url)).toHaveLength(1);
    });

    it('pm_card_chargeThenHang: no answer until the client gives up; a retry replays the charge', async () => {
      const sim = await start({ delayMs: 20 });
      const form = { ...VISA, payment_method: 'pm_card_chargeThenHang' };
      await expect(call(sim.url, { path: '/v1/payment_intents', key: 'k-hang', form, timeoutMs: 400 })).rejects.toThrow(/no answer within 400 ms/);
      const [charged] = await listIntents(sim.url);
      const retry = await call(sim.url, { path: '/v1/payment_intents', key: 'k-hang', form });
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.json().id).toBe(charged.id);
    });

    it('pm_card_chargeThenError: 500 api_error without a code, then the replay answers 200', async () => {
      const sim = await start({ delayMs: 20 });
      const form = { ...VISA, payment_method: 'pm_card_chargeThenError' };
      const first = await call(sim.url, { path: '/v1/payment_intents', key: 'k-err', form });
      expect(first.status).toBe(500);
      expect(first.json()).toEqual({ error: { type: 'api_error', message: expect.any(String) } });
      expect(first.headers['idempotency-key']).toBe('k-err');
      const retry = await call(sim.url, { path: '/v1/payment_intents', key: 'k-err', form });
      expect(retry.status).toBe(200);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.json().id).toBe((await listIntents(sim.url))[0].id);
      // Without a key every call is a first call: each one charges and loses its answer.
      expect((await call(sim.url, { path: '/v1/payment_intents', form })).status).toBe(500);
      expect(await listIntents(sim.url)).toHaveLength(2);
    });
  });

  describe('POST /_simulator/faults', () => {
    it('loses the next n answers of POSTs with an effect, replays included (JSON body); validation errors do not use them up', async () => {
      const sim = await start();
      const saved = await call(sim.url, { path: '/v1/payment_intents', key: 'k-saved', form: VISA });
      const set = await call(sim.url, { path: '/_simulator/faults', json: { fault: 'drop', times: 3 } });
      expect(set.status).toBe(200);
      expect((await stats(sim.url)).pending_faults).toBe(3);

      expect((await call(sim.url, { path: '/v1/payment_intents', form: { ...VISA, amount: -1 } })).status).toBe(400);
      expect((await call(sim.url, { path: '/v1/payment_intents', form: { ...VISA, payment_method: 'pm_card_nonsense' } })).status).toBe(400);
      expect((await stats(sim.url)).pending_faults).toBe(3);

      // A replay's answer is lost too (the network loses answers, not effects).
      await expect(call(sim.url, { path: '/v1/payment_intents', key: 'k-saved', form: VISA })).rejects.toThrow();
      await expect(call(sim.url, { path: '/v1/payment_intents', key: 'k-1', form: VISA })).rejects.toThrow();
      await expect(call(sim.url, { path: '/v1/payment_intents', form: VISA })).rejects.toThrow();
      expect((await stats(sim.url)).pending_faults).toBe(0);
      expect((await call(sim.url, { path: '/v1/payment_intents', form: VISA })).status).toBe(200);
      expect(await listIntents(sim.url)).toHaveLength(4);
      const retried = await call(sim.url, { path: '/v1/payment_intents', key: 'k-1', form: VISA });
      expect(retried.headers['idempotent-replayed']).toBe('true');
      const replayed = await call(sim.url, { path: '/v1/payment_intents', key: 'k-saved', form: VISA });
      expect(replayed.text).toBe(saved.text);
      expect(await listIntents(sim.url)).toHaveLength(4);
    });

    it('turns a refund answer into a 500 (form body); hang never answers; DELETE clears; faults are per secret', async () => {
      const sim = await start();
      const pi = (await call(sim.url, { path: '/v1/payment_intents', form: VISA })).json().id as string;
      await call(sim.url, { path: '/_simulator/faults', form: { fault: 'error' } });
      const refund = await call(sim.url, { path: '/v1/refunds', key: 'r-err', form: { payment_intent: pi, amount: 100 } });
      expect(refund.status).toBe(500);
      expect(refund.json()).toEqual({ error: { type: 'api_error', message: expect.any(String) } });
      const replay = await call(sim.url, { path: '/v1/refunds', key: 'r-err', form: { payment_intent: pi, amount: 100 } });
      expect(replay.status).toBe(200);
      expect(replay.json()).toMatchObject({ object: 'refund', amount: 100 });

      await call(sim.url, { path: '/_simulator/faults', json: { fault: 'hang', times: 1 } });
      expect((await call(sim.url, { path: '/v1/payment_intents', form: VISA, secret: OTHER_SECRET })).status).toBe(200);
      await expect(call(sim.url, { path: '/v1/refunds', form: { payment_intent: pi, amount: 1 }, timeoutMs: 300 })).rejects.toThrow(/no answer/);
      expect((await call(sim.url, { path: `/v1/refunds?payment_intent=${pi}` })).json<{ data: unknown[] }>().data).toHaveLength(2);

      await call(sim.url, { path: '/_simulator/faults', json: { fault: 'drop', times: 3 } });
      const cleared = await call(sim.url, { method: 'DELETE', path: '/_simulator/faults' });
      expect(cleared.status).toBe(200);
      expect((await stats(sim.url)).pending_faults).toBe(0);
      expect((await call(sim.url, { path: '/v1/payment_intents', form: VISA })).status).toBe(200);

      const bad = await call(sim.url, { path: '/_simulator/faults', json: { fault: 'explode' } });
      expect(bad.status).toBe(400);
      expect(bad.json()).toMatchObject({ error: { code: 'parameter_invalid', param: 'fault', message: 'fault must be one of drop, hang, error, saved_error' } });
      expect((await stats(sim.url)).pending_faults).toBe(0);
      expect((await call(sim.url, { path: '/_simulator/faults', secret: null, json: { fault: 'drop' } })).status).toBe(401);
    });
  });

  describe('POST /_simulator/faults: saved_error', () => {
    const events = async (url: string) => (await call(url, { path: '/v1/events' })).json<{ data: { type: string }[] }>().data.map((e) => e.type);
    const create = (url: string, key?: string, form: Record<string, string | number> = VISA) => call(url, { path: '/v1/payment_intents', key, form });

    it('saves a 500 under the key instead of executing: no intent, no event; retries replay it', async () => {
      const sim = await start({ delayMs: 20 });
      const set = await call(sim.url, { path: '/_simulator/faults', json: { fault: 'saved_error', times: 1 } });
      expect(set.json()).toMatchObject({ pending: ['saved_error'], pending_faults: 1 });

      const first = await create(sim.url, 'k-saved');
      expect(first.status).toBe(500);
      expect(first.json()).toEqual({ error: { type: 'api_error', message: 'An unknown error occurred while processing your request.' } });
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(first.headers['stripe-should-retry']).toBeUndefined();
      expect(await listIntents(sim.url)).toHaveLength(0);
      expect(await events(sim.url)).toEqual([]);
      expect((await stats(sim.url)).pending_faults).toBe(0);

      for (let i = 0; i < 2; i++) {
        const retry = await create(sim.url, 'k-saved');
        expect(retry.status).toBe(500);
        expect(retry.text).toBe(first.text);
        expect(retry.headers['idempotent-replayed']).toBe('true');
        expect(retry.headers['original-request']).toBe(first.headers['request-id']);
      }
      // The key is bound to what it was first used with, as for any saved result.
      const other = await create(sim.url, 'k-saved', { ...VISA, amount: 2000 });
      expect(other.json()).toMatchObject({ error: { type: 'idempotency_error' } });
      expect(await listIntents(sim.url)).toHaveLength(0);
      // Another key executes: the fault was used up.
      expect((await create(sim.url, 'k-other')).json()).toMatchObject({ status: 'succeeded' });
      expect(await events(sim.url)).toEqual(['payment_intent.succeeded']);
    });

    it('is taken only by a keyed request that would execute: not by one without a key, a replay or a validation error', async () => {
      const sim = await start();
      const saved = await create(sim.url, 'k-done');
      await call(sim.url, { path: '/_simulator/faults', form: { fault: 'saved_error', times: 2 } });

      expect((await create(sim.url)).status).toBe(200);
      const replay = await create(sim.url, 'k-done');
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(saved.text);
      expect((await create(sim.url, 'k-bad', { ...VISA, amount: 0 })).status).toBe(400);
      expect((await create(sim.url, 'k-bad', { ...VISA, payment_method: 'pm_card_nonsense' })).status).toBe(400);
      expect((await stats(sim.url)).pending_faults).toBe(2);
      expect(await listIntents(sim.url)).toHaveLength(2);

      expect((await create(sim.url, 'k-bad')).status).toBe(500);
      expect((await create(sim.url, 'k-3')).status).toBe(500);
      expect((await stats(sim.url)).pending_faults).toBe(0);
      expect(await listIntents(sim.url)).toHaveLength(2);
    });

    it('after the key window the key is free again and the request executes', async () => {
      const ttl = 250;
      const sim = await start({ idempotencyTtlMs: ttl });
      await call(sim.url, { path: '/_simulator/faults', json: { fault: 'saved_error' } });
      const t0 = performance.now();
      expect((await create(sim.url, 'k-window')).status).toBe(500);
      expect((await create(sim.url, 'k-window')).headers['idempotent-replayed']).toBe('true');
      const executed = await waitFor(async () => {
        const res = await create(sim.url, 'k-window');
        return res.status === 200 ? res : undefined;
      });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(ttl - 10);
      expect(executed.headers['idempotent-replayed']).toBeUndefined();
      expect(executed.json()).toMatchObject({ status: 'succeeded', amount: 1000 });
      expect(await listIntents(sim.url)).toHaveLength(1);
    });

    it('a confirm: the intent is not charged; the key keeps answering 500; a new key charges once', async () => {
      const sim = await start();
      const stripe = stripeClient(sim, { maxNetworkRetries: 1 });
      const intent = await stripe.paymentIntents.create({ amount: 1000, currency: 'usd', payment_method: 'pm_card_visa' });
      await call(sim.url, { path: '/_simulator/faults', json: { fault: 'saved_error' } });
      const confirm = (key: string) => stripe.paymentIntents.confirm(intent.id, { error_on_requires_action: true }, { idempotencyKey: key });

      // The SDK resends a 500 with the same key and gets the saved 500 back.
      const error = (await confirm('c-saved').catch((e: unknown) => e)) as Stripe.errors.StripeAPIError;
      expect(error).toBeInstanceOf(Stripe.errors.StripeAPIError);
      expect(error.statusCode).toBe(500);
      expect(error.headers?.['idempotent-replayed']).toBe('true');
      expect((await stripe.paymentIntents.retrieve(intent.id)).status).toBe('requires_confirmation');
      expect(await events(sim.url)).toEqual([]);

      const paid = await confirm('c-new');
      expect(paid).toMatchObject({ status: 'succeeded', amount_received: 1000 });
      const again = await call(sim.url, { path: `/v1/payment_intents/${intent.id}/confirm`, key: 'c-saved', form: { error_on_requires_action: 'true' } });
      expect({ status: again.status, replayed: again.headers['idempotent-replayed'] }).toEqual({ status: 500, replayed: 'true' });
      expect(await events(sim.url)).toEqual(['payment_intent.succeeded']);
    });

    it('keeps its place among lost-answer faults: each request takes one fault of its own kind', async () => {
      const sim = await start();
      await call(sim.url, { path: '/_simulator/faults', json: { fault: 'drop' } });
      await call(sim.url, { path: '/_simulator/faults', json: { fault: 'saved_error' } });
      expect((await call(sim.url, { path: '/_simulator/stats' })).json()).toMatchObject({ pending_faults: 2 });
      // The keyed request takes the saved 500 (the drop does not lose that answer) ...
      expect((await create(sim.url, 'k-mixed')).status).toBe(500);
      expect(await listIntents(sim.url)).toHaveLength(0);
      // ... and the next executed request loses its answer to the drop.
      await expect(create(sim.url)).rejects.toThrow(/socket hang up|ECONNRESET/);
      expect(await listIntents(sim.url)).toHaveLength(1);
      expect((await stats(sim.url)).pending_faults).toBe(0);
    });
  });

  describe('POST /_simulator/refusals', () => {
    it("refuses the next request with a 400 naming a parameter, as Stripe refuses a value; nothing is created; the next passes", async () => {
      const sim = await start({ delayMs: 0 });
      const refusal = await call(sim.url, { path: '/_simulator/refusals', json: { status: 400, param: 'amount' } });
      expect(refusal.status).toBe(200);
      const refused = await call(sim.url, { path: '/v1/payment_intents', key: 'k-param', form: VISA });
      expect(refused.status).toBe(400);
      expect(refused.headers['stripe-should-retry']).toBe('false');
      expect(refused.json()).toEqual({
        error: { type: 'invalid_request_error', code: 'parameter_invalid', param: 'amount', message: 'Invalid amount (refused by a simulator fault).' },
      });
      expect(await listIntents(sim.url)).toHaveLength(0);
      expect((await call(sim.url, { path: '/v1/payment_intents', key: 'k-param', form: VISA })).status).toBe(200);
      expect((await call(sim.url, { path: '/_simulator/refusals', json: { status: 429, param: 'amount' } })).status).toBe(400);
    });
  });

  describe('hold and release', () => {
    it('holds POSTs unexecuted, discards one whose client left, executes the rest in arrival order', async () => {
      const sim = await start();
      expect((await call(sim.url, { path: '/_simulator/hold', form: {} })).status).toBe(200);
      const a = call(sim.url, { path: '/v1/payment_intents', key: 'held-a', form: { ...VISA, amount: 100 } });
      await waitFor(async () => (await stats(sim.url)).held === 1, async () => (await stats(sim.url)).held);
      const abort = new AbortController();
      const gone = call(sim.url, { path: '/v1/payment_intents', key: 'held-gone', form: { ...VISA, amount: 200 }, signal: abort.signal });
      await waitFor(async () => (await stats(sim.url)).held === 2, async () => (await stats(sim.url)).held);
      const c = call(sim.url, { path: '/v1/payment_intents', form: { ...VISA, amount: 300 } });
      await waitFor(async () => (await stats(sim.url)).held === 3, async () => (await stats(sim.url)).held);
      // Held means not executed: nothing charged, and GETs still answer.
      expect(await listIntents(sim.url)).toHaveLength(0);

      abort.abort();
      await expect(gone).rejects.toThrow();
      await waitFor(async () => (await stats(sim.url)).held === 2, async () => (await stats(sim.url)).held);

      const release = await call(sim.url, { path: '/_simulator/release', form: {} });
      expect(release.json()).toMatchObject({ released: 2, held: 0, holding: false });
      const [ra, rc] = await Promise.all([a, c]);
      expect([ra.status, rc.status]).toEqual([200, 200]);
      const ledger = await listIntents(sim.url);
      expect(ledger.map((i) => i.amount)).toEqual([300, 100]);
      expect(ledger.map((i) => i.id)).toEqual([rc.json().id, ra.json().id]);
      // The discarded request never happened: its key is free for other parameters.
      const reuse = await call(sim.url, { path: '/v1/payment_intents', key: 'held-gone', form: { ...VISA, amount: 400 } });
      expect(reuse.status).toBe(200);
      expect(reuse.headers['idempotent-replayed']).toBeUndefined();
    });

    it('holds only the account that asked', async () => {
      const sim = await start();
      await call(sim.url, { path: '/_simulator/hold', form: {} });
      expect((await call(sim.url, { path: '/v1/payment_intents', form: VISA, secret: OTHER_SECRET })).status).toBe(200);
      expect((await stats(sim.url, OTHER_SECRET)).held).toBe(0);
      await call(sim.url, { path: '/_simulator/release', form: {} });
    });
  });

  describe('close()', () => {
    it('ends hung sockets, pending delays and held requests at once', async () => {
      // The answer is due long after the test's timeout: a close() that waited for it
      // (or for the hung socket, or the held request) fails the test.
      const sim = await start({ delayMs: 10 * 60_000 });
      const delayed = call(sim.url, { path: '/v1/payment_intents', form: VISA });
      const hung = call(sim.url, { path: '/v1/payment_intents', form: { ...VISA, payment_method: 'pm_card_chargeThenHang' }, secret: OTHER_SECRET });
      await waitFor(async () => (await listIntents(sim.url)).length === 1 && (await listIntents(sim.url, OTHER_SECRET)).length === 1);
      await call(sim.url, { path: '/_simulator/hold', form: {} });
      const held = call(sim.url, { path: '/v1/payment_intents', form: VISA });
      await waitFor(async () => (await stats(sim.url)).held === 1, async () => (await stats(sim.url)).held);

      const outcomes = Promise.allSettled([delayed, hung, held]);
      await sim.close();
      // Each socket was ended by close(): none got an answer.
      expect((await outcomes).map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
      await sim.close();
    });
  });
});
