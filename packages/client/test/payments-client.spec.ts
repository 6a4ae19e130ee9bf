import { keyFor, Order, Payment, PaymentsClient, ProblemError, Refund } from '../src';
import { json, problem, scriptedFetch, Step } from './fake-fetch';

function setup(...steps: Step[]) {
  const { fetch, calls } = scriptedFetch(...steps);
  const client = new PaymentsClient({ baseUrl: 'https://api.example.com', apiKey: 'sk_test', fetch, random: () => 0 });
  return { client, calls };
}

const order: Order = {
  id: 'ord_1',
  status: 'pending',
  currency: 'EUR',
  amount_total: 2500,
  items: [{ sku: 'tee', quantity: 2, unit_amount: 1250 }],
  created_at: '2026-01-15T12:00:00.000Z',
};

const payment: Payment = {
  id: 'pay_1',
  status: 'succeeded',
  amount: 2500,
  currency: 'EUR',
  order_id: 'ord_1',
  description: null,
  amount_refunded: 0,
  created_at: '2026-01-15T12:00:01.000Z',
  failure_code: null,
};

describe('PaymentsClient', () => {
  it('createOrder posts the order and returns it typed', async () => {
    const { client, calls } = setup(json(201, order));

    const result = await client.createOrder({ currency: 'EUR', items: order.items });

    expect(result.body.amount_total).toBe(2500);
    expect(calls[0]).toMatchObject({ method: 'POST', url: 'https://api.example.com/orders' });
    expect(JSON.parse(calls[0].body!)).toEqual({ currency: 'EUR', items: [{ sku: 'tee', quantity: 2, unit_amount: 1250 }] });
  });

  it('cancelOrder posts to the order, with an encoded id and the given key', async () => {
    const { client, calls } = setup(json(200, { ...order, status: 'canceled' }));
    const idempotencyKey = await keyFor('cancel-order', 'ord/1');

    const result = await client.cancelOrder('ord/1', { idempotencyKey });

    expect(result.body.status).toBe('canceled');
    expect(calls[0]).toMatchObject({ method: 'POST', url: 'https://api.example.com/orders/ord%2F1/cancel', body: '{}' });
    expect(calls[0].headers['Idempotency-Key']).toBe(idempotencyKey);
  });

  it('getOrder and getPayment GET by id', async () => {
    const { client, calls } = setup(json(200, order), json(200, payment));

    await expect(client.getOrder('ord_1')).resolves.toMatchObject({ body: { id: 'ord_1' } });
    await expect(client.getPayment('pay_1')).resolves.toMatchObject({ body: { id: 'pay_1', amount_refunded: 0 } });
    expect(calls.map((c) => [c.method, c.url])).toEqual([
      ['GET', 'https://api.example.com/orders/ord_1'],
      ['GET', 'https://api.example.com/payments/pay_1'],
    ]);
  });

  it('createPayment keeps its key across a retry and reports the replay', async () => {
    const { client, calls } = setup(problem(409, 'idempotency_request_in_progress', { 'Retry-After': '0' }), json(201, payment, { 'Idempotent-Replayed': 'true' }));

    const result = await client.createPayment({ amount: 2500, currency: 'EUR', source: 'tok_visa', order_id: 'ord_1' });

    expect(result).toMatchObject({ status: 201, replayed: true, attempts: 2, body: { id: 'pay_1' } });
    expect(calls[0].headers['Idempotency-Key']).toBe(calls[1].headers['Idempotency-Key']);
    expect(calls[0].body).toBe(calls[1].body);
  });

  it('createPayment surfaces a declined card (402) as a ProblemError without retrying', async () => {
    const { client, calls } = setup(problem(402, 'card_declined'));

    const error = await client.createPayment({ amount: 2500, currency: 'EUR', source: 'tok_declined' }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ProblemError);
    expect(error).toMatchObject({ status: 402, code: 'card_declined' });
    expect(calls).toHaveLength(1);
  });

  it('refundPayment posts the amount, or an empty body for a full refund', async () => {
    const refund: Refund = { id: 're_1', payment_id: 'pay_1', amount: 500, status: 'succeeded', failure_reason: null, created_at: '2026-01-15T12:00:02.000Z' };
    const { client, calls } = setup(json(201, refund), json(201, { ...refund, amount: 2000 }));

    await expect(client.refundPayment('pay_1', { amount: 500 })).resolves.toMatchObject({ body: { amount: 500 } });
    await client.refundPayment('pay_1');

    expect(calls.map((c) => [c.url, c.body])).toEqual([
      ['https://api.example.com/payments/pay_1/refunds', '{"amount":500}'],
      ['https://api.example.com/payments/pay_1/refunds', '{}'],
    ]);
  });

  it('refuses ids that would leave their path segment', async () => {
    const { client, calls } = setup();

    await expect(client.getOrder('..')).rejects.toThrow(TypeError);
    await expect(client.getPayment('')).rejects.toThrow(TypeError);
    expect(calls).toHaveLength(0);
  });
});
