import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { CLIENT_B, TestApp, countRows, createTestApp } from '../support/app';
import { orderBody } from '../support/fixtures';
import { GraphqlAnswer, createOrderMutation, errorCode, graphql } from '../support/graphql';
import { keyIs } from '../support/keys';

type Order = { id: string; status: string; currency: string; amount_total: number; items: unknown[]; created_at: string };

describe('GraphQL orders (e2e)', () => {
  let t: TestApp;
  const server = () => t.app.getHttpServer();

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('creates an order with createOrder, the same service and shape as POST /orders', async () => {
    const res = await createOrderMutation(server(), t.auth(), randomUUID()).expect(200);
    const answer = res.body as GraphqlAnswer<{ createOrder: Order }>;
    expect(answer.errors).toBeUndefined();
    const order = answer.data!.createOrder;
    expect(order).toMatchObject({ status: 'pending', currency: 'usd', amount_total: 3998 });
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    const rest = await request(server()).get(`/orders/${order.id}`).set(t.auth()).expect(200);
    expect(rest.body).toEqual(order);
    const query = await graphql(server(), t.auth(), { query: 'query($id: ID!) { order(id: $id) { id amount_total } }', variables: { id: order.id } }).expect(200);
    expect(query.body.data).toEqual({ order: { id: order.id, amount_total: 3998 } });
  });

  it('replays a retry: the same order, no second row, Idempotent-Replayed on the HTTP answer', async () => {
    const key = randomUUID();
    const first = (await createOrderMutation(server(), t.auth(), key).expect(200)).body as GraphqlAnswer<{ createOrder: Order }>;
    const before = await countRows(t.dataSource, 'orders');
    const retry = await createOrderMutation(server(), t.auth(), key).expect(200);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect((retry.body as GraphqlAnswer<{ createOrder: Order }>).data).toEqual(first.data);
    expect(await countRows(t.dataSource, 'orders')).toBe(before);
  });

  it('replays with the selection of the retry: the fields it asks for', async () => {
    const key = randomUUID();
    const first = (await createOrderMutation(server(), t.auth(), key).expect(200)).body as GraphqlAnswer<{ createOrder: Order }>;
    const narrow = await graphql(server(), t.auth(), { query: 'mutation($input: CreateOrderInput!) { createOrder(input: $input) { id } }', variables: { input: orderBody() } }, key).expect(200);
    expect(narrow.body.data).toEqual({ createOrder: { id: first.data!.createOrder.id } });
  });

  it('refuses the key reused with another input: IDEMPOTENCY_KEY_REUSED, nothing written', async () => {
    const key = randomUUID();
    await createOrderMutation(server(), t.auth(), key).expect(200);
    const before = await countRows(t.dataSource, 'orders');
    const res = await createOrderMutation(server(), t.auth(), key, orderBody({ currency: 'eur' })).expect(200);
    expect(res.body.data).toBeNull();
    expect(errorCode(res.body as GraphqlAnswer)).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(await countRows(t.dataSource, 'orders')).toBe(before);
  });

  it.each([
    ['the same input', 'mutation($a: CreateOrderInput!) { a: createOrder(input: $a) { id } b: createOrder(input: $a) { id } }'],
    ['other inputs', 'mutation($a: CreateOrderInput!, $b: CreateOrderInput!) { a: createOrder(input: $a) { id } b: createOrder(input: $b) { id } }'],
    ['a fragment', 'mutation($a: CreateOrderInput!, $b: CreateOrderInput!) { a: createOrder(input: $a) { id } ...B } fragment B on Mutation { b: createOrder(input: $b) { id } }'],
  ])('refuses aliased createOrder fields under one key (%s) before any runs: a GraphQL error, no order, the key free', async (_name, query) => {
    const key = randomUUID();
    const before = await countRows(t.dataSource, 'orders');
    const res = await graphql(server(), t.auth(), { query, variables: { a: orderBody(), b: orderBody({ currency: 'eur' }) } }, key).expect(200);
    const answer = res.body as GraphqlAnswer;
    expect(answer.data).toBeNull();
    expect(errorCode(answer)).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(answer.errors![0].message).toMatch(/selects Mutation\.createOrder 2 times \(aliases\): nothing was run/);
    expect(await countRows(t.dataSource, 'orders')).toBe(before);
    expect(await countRows(t.dataSource, 'idempotency_keys', keyIs(), [key])).toBe(0);
    // The key is free: one createOrder under it creates the order.
    const single = (await createOrderMutation(server(), t.auth(), key).expect(200)).body as GraphqlAnswer<{ createOrder: Order }>;
    expect(single.data!.createOrder.id).toEqual(expect.any(String));
  });

  it('runs one createOrder selected twice under one response name once (GraphQL merges them): the order', async () => {
    const query = 'mutation($a: CreateOrderInput!) { createOrder(input: $a) { id } createOrder(input: $a) { status } }';
    const res = await graphql(server(), t.auth(), { query, variables: { a: orderBody() } }, randomUUID()).expect(200);
    expect((res.body as GraphqlAnswer).errors).toBeUndefined();
    expect(res.body.data.createOrder).toMatchObject({ id: expect.any(String), status: 'pending' });
  });

  it('refuses a mutation without a key (IDEMPOTENCY_KEY_MISSING) or with an invalid one (IDEMPOTENCY_KEY_INVALID)', async () => {
    const before = await countRows(t.dataSource, 'orders');
    const missing = await createOrderMutation(server(), t.auth(), undefined).expect(200);
    expect(errorCode(missing.body as GraphqlAnswer)).toBe('IDEMPOTENCY_KEY_MISSING');
    const invalid = await createOrderMutation(server(), t.auth(), 'x'.repeat(256)).expect(200);
    expect(errorCode(invalid.body as GraphqlAnswer)).toBe('IDEMPOTENCY_KEY_INVALID');
    expect(await countRows(t.dataSource, 'orders')).toBe(before);
  });

  it('keeps keys per client: the same key from another client is another order', async () => {
    const key = randomUUID();
    const a = (await createOrderMutation(server(), t.auth(), key).expect(200)).body as GraphqlAnswer<{ createOrder: Order }>;
    const b = (await createOrderMutation(server(), t.auth(CLIENT_B), key).expect(200)).body as GraphqlAnswer<{ createOrder: Order }>;
    expect(b.data!.createOrder.id).not.toBe(a.data!.createOrder.id);
  });

  it('shares the client\'s keys with REST: a key used on POST /orders is a reuse for createOrder', async () => {
    const key = randomUUID();
    await request(server()).post('/orders').set(t.auth()).set('Idempotency-Key', key).send(orderBody()).expect(201);
    const before = await countRows(t.dataSource, 'orders');
    const res = await createOrderMutation(server(), t.auth(), key).expect(200);
    expect(errorCode(res.body as GraphqlAnswer)).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(await countRows(t.dataSource, 'orders')).toBe(before);
  });

  it('answers invalid input as a GraphQL error VALIDATION_FAILED and keeps the key free', async () => {
    const key = randomUUID();
    const res = await createOrderMutation(server(), t.auth(), key, orderBody({ currency: 'usdd' })).expect(200);
    expect(errorCode(res.body as GraphqlAnswer)).toBe('VALIDATION_FAILED');
    expect(await countRows(t.dataSource, 'idempotency_keys', keyIs(), [key])).toBe(0);
    const retried = await createOrderMutation(server(), t.auth(), key).expect(200);
    expect((retried.body as GraphqlAnswer<{ createOrder: Order }>).data!.createOrder.status).toBe('pending');
  });

  it('answers an unknown order as a GraphQL error NOT_FOUND', async () => {
    const res = await graphql(server(), t.auth(), { query: 'query($id: ID!) { order(id: $id) { id } }', variables: { id: randomUUID() } }).expect(200);
    expect(errorCode(res.body as GraphqlAnswer)).toBe('NOT_FOUND');
  });

  it('needs an API key like every route: 401 problem+json before the body is read', async () => {
    const res = await createOrderMutation(server(), {}, randomUUID()).expect(401);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  });
});
