import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { CLIENT_A, TestApp } from './app';

/** Factories for test data, created through the public API like a client would. */
export function orderBody(overrides: Record<string, unknown> = {}) {
  return { currency: 'USD', items: [{ sku: 'sku_tshirt', quantity: 2, unit_amount: 1999 }], ...overrides };
}

export function paymentBody<T extends Record<string, unknown>>(overrides: T = {} as T) {
  return { amount: 1000, currency: 'usd', source: 'tok_visa', ...overrides };
}

/** POST with a fresh key, expecting 201: the created resource. */
async function create<T>(t: TestApp, path: string, body: object, client: { key: string }): Promise<T> {
  const res = await request(t.app.getHttpServer()).post(path).set(t.auth(client)).set('Idempotency-Key', randomUUID()).send(body).expect(201);
  return res.body as T;
}

export function createOrder(t: TestApp, body = orderBody(), client = CLIENT_A) {
  return create<{ id: string; amount_total: number; currency: string; status: string }>(t, '/orders', body, client);
}

export function createPayment(t: TestApp, body = paymentBody(), client = CLIENT_A) {
  return create<{ id: string; amount: number; status: string }>(t, '/payments', body, client);
}
