import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { CLIENT_A, CLIENT_B, TestApp, countRows, createTestApp } from '../support/app';
import { createOrder, orderBody } from '../support/fixtures';
import { keyIs } from '../support/keys';

describe('orders (e2e)', () => {
  let t: TestApp;
  const http = () => request(t.app.getHttpServer());

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('creates a pending order with the total in minor units and the currency lower-cased', async () => {
    const res = await http().post('/orders').set(t.auth()).set('Idempotency-Key', randomUUID())
      .send(orderBody({ items: [{ sku: 'a', quantity: 3, unit_amount: 250 }, { sku: 'b', quantity: 1, unit_amount: 0 }] }))
      .expect(201);
    expect(res.body).toMatchObject({ status: 'pending', currency: 'usd', amount_total: 750 });
    expect(res.body.items).toEqual([{ sku: 'a', quantity: 3, unit_amount: 250 }, { sku: 'b', quantity: 1, unit_amount: 0 }]);
    expect(res.headers.location).toBe(`/orders/${res.body.id}`);
    const got = await http().get(`/orders/${res.body.id}`).set(t.auth()).expect(200);
    expect(got.body).toEqual(res.body);
  });

  it.each([
    ['unknown field', { ...orderBody(), coupon: 'x' }, 'coupon'],
    ['bad currency', orderBody({ currency: 'usdd' }), 'currency'],
    ['not ISO 4217', orderBody({ currency: 'abc' }), 'currency'],
    ['no items', orderBody({ items: [] }), 'items'],
    ['101 items', orderBody({ items: Array.from({ length: 101 }, () => ({ sku: 's', quantity: 1, unit_amount: 1 })) }), 'items'],
    ['quantity 0', orderBody({ items: [{ sku: 's', quantity: 0, unit_amount: 1 }] }), 'items[0].quantity'],
    ['quantity 1001', orderBody({ items: [{ sku: 's', quantity: 1001, unit_amount: 1 }] }), 'items[0].quantity'],
    ['negative unit_amount', orderBody({ items: [{ sku: 's', quantity: 1, unit_amount: -1 }] }), 'items[0].unit_amount'],
    ['fractional unit_amount', orderBody({ items: [{ sku: 's', quantity: 1, unit_amount: 1.5 }] }), 'items[0].unit_amount'],
    ['string unit_amount', orderBody({ items: [{ sku: 's', quantity: 1, unit_amount: '100' }] }), 'items[0].unit_amount'],
    ['over-long sku', orderBody({ items: [{ sku: 's'.repeat(65), quantity: 1, unit_amount: 1 }] }), 'items[0].sku'],
  ])('refuses %s with 400 validation_failed, writes nothing and keeps the key free', async (_n, body, field) => {
    const key = randomUUID();
    const before = await countRows(t.dataSource, 'orders');
    const res = await http().post('/orders').set(t.auth()).set('Idempotency-Key', key).send(body).expect(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body.code).toBe('validation_failed');
    expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    expect(await countRows(t.dataSource, 'orders')).toBe(before);
    expect(await countRows(t.dataSource, 'idempotency_keys', keyIs(), [key])).toBe(0);
  });

  it('cancels a pending order once; a second cancel is a stored 422 order_not_cancelable', async () => {
    const order = await createOrder(t);
    const key = randomUUID();
    const canceled = await http().post(`/orders/${order.id}/cancel`).set(t.auth()).set('Idempotency-Key', key).expect(200);
    expect(canceled.body.status).toBe('canceled');
    const replay = await http().post(`/orders/${order.id}/cancel`).set(t.auth()).set('Idempotency-Key', key).expect(200);
    expect(replay.headers['idempotent-replayed']).toBe('true');

    const again = randomUUID();
    const refused = await http().post(`/orders/${order.id}/cancel`).set(t.auth()).set('Idempotency-Key', again).expect(422);
    expect(refused.body.code).toBe('order_not_cancelable');
    const replayed = await http().post(`/orders/${order.id}/cancel`).set(t.auth()).set('Idempotency-Key', again).expect(422);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.text).toBe(refused.text);
  });

  it("answers 404 for another client's order, and for an unknown or malformed id", async () => {
    const order = await createOrder(t);
    expect((await http().get(`/orders/${order.id}`).set(t.auth(CLIENT_B)).expect(404)).body.code).toBe('not_found');
    await http().post(`/orders/${order.id}/cancel`).set(t.auth(CLIENT_B)).set('Idempotency-Key', randomUUID()).expect(404);
    await http().get(`/orders/${randomUUID()}`).set(t.auth()).expect(404);
    await http().get('/orders/not-a-uuid').set(t.auth()).expect(404);
    expect((await http().get(`/orders/${order.id}`).set(t.auth()).expect(200)).body.status).toBe('pending');
  });

  it('lists only the caller\'s orders, newest first, with cursor pagination', async () => {
    // On this file's shared database, where other tests may have made orders: the
    // seven made here are the caller's newest, so they lead the listing, and the
    // walk must cover exactly the caller's orders in the database.
    const mine: string[] = [];
    for (let i = 0; i < 7; i++) mine.push((await createOrder(t)).id);
    const theirs = await createOrder(t, orderBody(), CLIENT_B);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res: request.Response = await http()
        .get('/orders').query(cursor ? { limit: 3, starting_after: cursor } : { limit: 3 })
        .set(t.auth()).expect(200);
      expect(res.body.data.length).toBeLessThanOrEqual(3);
      seen.push(...res.body.data.map((o: { id: string }) => o.id));
      cursor = res.body.next_cursor;
      expect(res.body.has_more).toBe(cursor !== null);
    } while (cursor);
    expect(seen.slice(0, 7)).toEqual([...mine].reverse());
    expect(seen).not.toContain(theirs.id);
    const callers = await t.dataSource.query<{ id: string }[]>(
      'SELECT o.id FROM orders o JOIN clients c ON c.id = o.client_id WHERE c.name = $1',
      [CLIENT_A.name],
    );
    expect([...seen].sort()).toEqual(callers.map((o) => o.id).sort());
    await http().get('/orders').query({ limit: 0 }).set(t.auth()).expect(400);
    const bad = await http().get('/orders').query({ starting_after: randomUUID() }).set(t.auth()).expect(400);
    expect(bad.body.code).toBe('invalid_cursor');
  });

  it('requires an API key', async () => {
    const res = await http().get('/orders').expect(401);
    expect(res.body.code).toBe('unauthorized');
    await http().get('/orders').set('Authorization', 'Bearer sk_wrong_wrong_wrong_wrong').expect(401);
  });
});
