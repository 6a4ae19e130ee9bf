import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { CLIENT_A, TestApp } from './app';

/** Factories for test data, created through the public API like a client would. */
export function orderBody(overrides: Record<string, unknown> = {}) {
  return { currency: 'USD', items: [{ sku: 'sku_tshirt', quantity: 2, unit_amount: 1999 }], ...overrides };
}

export function paymentBody(overrides: Record<string, unknown> = {}) {
  return { amount: 1000, currency: 'usd', source: 'tok_visa', ...overrides };
}

export async function createOrder(t: TestApp, body = orderBody(), client = CLIENT_A) {
  const res = await request(t.app.getHttpServer())
    .post('/orders')
    .set(t.auth(client))
    .set('Idempotency-Key', randomUUID())
    .send(body)
    .expect(201);
  return res.body as { id: string; amount_total: number; currency: string; status: string };
}

export async function createPayment(t: TestApp, body = paymentBody(), client = CLIENT_A) {
  const res = await request(t.app.getHttpServer())
    .post('/payments')
    .set(t.auth(client))
    .set('Idempotency-Key', randomUUID())
    .send(body)
    .expect(201);
  return res.body as { id: string; amount: number; status: string };
}
