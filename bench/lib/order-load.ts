import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import { BENCH_CLIENT } from './app';

/** A one-item order as the bench client posts it (POST /orders and the bench's order routes). */
export const ORDER = JSON.stringify({ currency: 'usd', items: [{ sku: 'sku_bench', quantity: 1, unit_amount: 1000 }] });
export const ORDER_HEADERS = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_CLIENT.key}` };

/** Autocannon, 20 connections for `seconds`: ORDER posted to `path`, a fresh Idempotency-Key each request. */
export async function newKeys(
  port: number,
  seconds: number,
  path = '/orders',
): Promise<{ requests: number; seconds: number; latenciesMs: number[]; non2xx: number; errors: number }> {
  const latenciesMs: number[] = [];
  const instance = autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: 20,
    duration: seconds,
    timeout: 10,
    requests: [
      { method: 'POST', path, headers: ORDER_HEADERS, body: ORDER, setupRequest: (r: object) => ({ ...r, headers: { ...ORDER_HEADERS, 'idempotency-key': randomUUID() } }) },
    ],
  });
  instance.on('response', (_client: unknown, _status: number, _bytes: number, ms: number) => latenciesMs.push(ms));
  const r = await instance;
  return { requests: latenciesMs.length, seconds: r.duration, latenciesMs, non2xx: r.non2xx, errors: r.errors };
}
