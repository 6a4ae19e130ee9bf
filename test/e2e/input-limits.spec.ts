import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { TestApp, countRows, createTestApp } from '../support/app';
import { createPayment, orderBody, paymentBody } from '../support/fixtures';

/**
 * What the API refuses before it does any work: bodies nested too deep (once a
 * 500 from the fingerprint's recursion), control characters in free text,
 * orders no payment could match, currencies a card cannot be charged in, and a
 * payment's refunds past the cap. See docs/security.md.
 */
describe('input limits (e2e)', () => {
  let t: TestApp;
  const http = () => request(t.app.getHttpServer());
  const post = (path: string, key = randomUUID()) =>
    http().post(path).set(t.auth()).set('Idempotency-Key', key).set('Content-Type', 'application/json');

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  describe('JSON nesting', () => {
    const deep = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);

    it.each(['/payments', '/orders'])('answers 10 KB of 5,000 nested arrays on POST %s with 400 invalid_json, and the key stays unused', async (path) => {
      const key = randomUUID();
      const body = deep(5_000);
      expect(body.length).toBe(10_000);
      const res = await post(path, key).send(body).expect(400);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ code: 'invalid_json', detail: 'The request body nests deeper than 32 levels.' });
      // Nothing ran: the key was never claimed (else this would be 422 idempotency_key_reused).
      await post(path, key).send(path === '/orders' ? orderBody() : paymentBody()).expect(201);
    });

    it('counts nesting inside objects, ignores brackets inside strings, and leaves 32 levels to validation', async () => {
      const nested33 = `{"currency":"usd","items":${'[{"a":'.repeat(16)}1${'}]'.repeat(16)}}`; // 1 + 32 levels
      expect((await post('/orders').send(nested33).expect(400)).body.code).toBe('invalid_json');
      const bracketsInText = JSON.stringify(paymentBody({ description: '['.repeat(100) }));
      await post('/payments').send(bracketsInText).expect(201);
      const res = await post('/payments').send(`{"amount":${deep(31)}}`).expect(400);
      expect(res.body.code).toBe('validation_failed');
    });
  });

  describe('prototype keys', () => {
    it.each([
      ['__proto__', (o: string) => `{"__proto__":{"amount_total":1},${o.slice(1)}`],
      ['constructor.prototype', (o: string) => `{"constructor":{"prototype":{"amount_total":1}},${o.slice(1)}`],
    ])('answers an order body with a %s key with 400 invalid_json, writes nothing, and the key stays unused', async (_name, poison) => {
      const key = randomUUID();
      const before = await countRows(t.dataSource, 'orders');
      const res = await post('/orders', key).send(poison(JSON.stringify(orderBody()))).expect(400);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ status: 400, code: 'invalid_json', detail: 'The request body has a __proto__ or constructor.prototype key.' });
      expect(await countRows(t.dataSource, 'orders')).toBe(before);
      await post('/orders', key).send(orderBody()).expect(201);
    });
  });

  describe('free text', () => {
    it.each(['a\u0000b', 'line\nbreak', 'tab\there', 'del\u007f', 'c1\u0085', 'sep\u2028'])('refuses the description %j', async (description) => {
      const res = await post('/payments').send(paymentBody({ description })).expect(400);
      expect(res.body).toMatchObject({ code: 'validation_failed', errors: [{ field: 'description' }] });
    });

    it.each(['a\u0000b', 'sku\u001b[31m', 'sku\u0085'])('refuses the sku %j', async (sku) => {
      const res = await post('/orders').send(orderBody({ items: [{ sku, quantity: 1, unit_amount: 100 }] })).expect(400);
      expect(res.body.code).toBe('validation_failed');
      expect(res.body.errors.map((e: { field: string }) => e.field)).toContain('items[0].sku');
    });

    it('accepts ordinary text, accents and emoji included', async () => {
      await post('/payments').send(paymentBody({ description: 'Commande n° 1001 – café ☕' })).expect(201);
    });
  });

  describe('order totals', () => {
    it.each([
      ['above the largest payment', [{ sku: 'a', quantity: 1000, unit_amount: 99_999_999 }]],
      ['just above it', [{ sku: 'a', quantity: 1, unit_amount: 99_999_999 }, { sku: 'b', quantity: 1, unit_amount: 1 }]],
      ['zero', [{ sku: 'free', quantity: 3, unit_amount: 0 }]],
    ])('refuses an order whose total is %s', async (_name, items) => {
      const before = await countRows(t.dataSource, 'orders');
      const res = await post('/orders').send(orderBody({ items })).expect(400);
      expect(res.body).toMatchObject({ code: 'validation_failed' });
      expect(res.body.errors).toContainEqual({ field: 'items', messages: ['the order total must be between 1 and 99999999 minor units'] });
      expect(await countRows(t.dataSource, 'orders')).toBe(before);
    });

    it('accepts a total of exactly the largest payment, and a free item beside a paid one', async () => {
      const big = await post('/orders').send(orderBody({ items: [{ sku: 'a', quantity: 1, unit_amount: 99_999_999 }] })).expect(201);
      expect(big.body.amount_total).toBe(99_999_999);
      const mixed = [{ sku: 'gift', quantity: 1, unit_amount: 0 }, { sku: 'a', quantity: 2, unit_amount: 5 }];
      expect((await post('/orders').send(orderBody({ items: mixed })).expect(201)).body.amount_total).toBe(10);
    });
  });

  describe('currencies', () => {
    it.each(['xau', 'XAG', 'xdr', 'xts', 'xxx', 'usn', 'che', 'cuc', 'sll', 'zwl', 'hrk', 'vef', 'mro', 'std', 'bgn', 'abc'])(
      'refuses %s on payments and orders',
      async (currency) => {
        expect((await post('/payments').send(paymentBody({ currency })).expect(400)).body.errors).toEqual([
          { field: 'currency', messages: ['currency must be a 3-letter ISO 4217 currency code'] },
        ]);
        await post('/orders').send(orderBody({ currency })).expect(400);
      },
    );

    it.each(['usd', 'EUR', 'jpy', 'sle', 'xcg'])('accepts %s', async (currency) => {
      await post('/payments').send(paymentBody({ currency })).expect(201);
    });

    it.each(['zwg', 'ves', 'cup', 'IRR'])('refuses %s on payments before the card network is asked: ISO 4217, but not charged in by the card network', async (currency) => {
      const before = await countRows(t.dataSource, 'payments');
      expect((await post('/payments').send(paymentBody({ currency })).expect(400)).body.errors).toEqual([
        { field: 'currency', messages: ['currency is a currency the card network does not charge in'] },
      ]);
      expect(await countRows(t.dataSource, 'payments')).toBe(before);
    });
  });

  describe("the card network's minimum charge", () => {
    it.each([
      ['usd', 49],
      ['gbp', 29],
      ['jpy', 49],
      ['huf', 17_499],
    ])('refuses %s %i before the card network is asked', async (currency, amount) => {
      const before = await countRows(t.dataSource, 'payments');
      const res = await post('/payments').send(paymentBody({ currency, amount })).expect(400);
      expect(res.body.errors).toEqual([{ field: 'amount', messages: [expect.stringMatching(/^amount must be at least \d+ \(minor units of [a-z]{3}\): the card network's minimum charge$/)] }]);
      expect(await countRows(t.dataSource, 'payments')).toBe(before);
    });

    it.each([
      ['usd', 50],
      ['gbp', 30],
      ['jpy', 50],
      ['isk', 1],
    ])('accepts %s %i', async (currency, amount) => {
      await post('/payments').send(paymentBody({ currency, amount })).expect(201);
    });
  });

  describe('refunds of one payment', () => {
    it('allows 100, answers the 101st with 422 refund_limit_reached (replayed), and lists at most 100', async () => {
      const payment = await createPayment(t, paymentBody({ amount: 1_000 }));
      for (let i = 0; i < 100; i++) {
        await post(`/payments/${payment.id}/refunds`).send({ amount: 1 }).expect(201);
      }
      const key = randomUUID();
      const refused = await post(`/payments/${payment.id}/refunds`, key).send({ amount: 1 }).expect(422);
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(refused.body).toMatchObject({ code: 'refund_limit_reached', max_refunds: 100 });
      const replay = await post(`/payments/${payment.id}/refunds`, key).send({ amount: 1 }).expect(422);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(refused.text);

      const got = await http().get(`/payments/${payment.id}`).set(t.auth()).expect(200);
      expect(got.body.refunds).toHaveLength(100);
      expect(got.body.amount_refunded).toBe(100);
      expect(await countRows(t.dataSource, 'refunds', 'payment_id = $1', [payment.id])).toBe(100);
    });
  });
});
