import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { LOG_DESTINATION } from '../../src/logging/logging.constants';
import { TestApp, countRows, createTestApp } from '../support/app';
import { Ledger } from '../support/card-network';
import { orderBody, paymentBody } from '../support/fixtures';
import { GraphqlAnswer, graphql } from '../support/graphql';
import { waitFor } from '../support/http-client';

/**
 * A card number (a brand's prefix and length, passing Luhn, written as one
 * group or in groups with one separator, in any digits) is card data: it is
 * refused wherever a client can put one, before anything is stored, sent to
 * the card network or logged — a payment's source and description, an order
 * item's sku, the Idempotency-Key header. Numbers that are not card numbers
 * (tracking and phone numbers, timestamps, SKUs) still go through.
 */
/** The digit sets these tests write numbers in, by their zero: ASCII, Arabic-Indic, Devanagari. */
const ZEROS = [0x30, 0x660, 0x966];
/** `text` with its ASCII digits written in the digit set whose zero is `zero`. */
const inDigits = (text: string, zero: number) => text.replace(/[0-9]/g, (d) => String.fromCodePoint(zero + Number(d)));
/** The digits of `value` (of any set of ZEROS) as ASCII, everything else left out. */
const digitsOf = (value: string) =>
  [...value]
    .map((c) => ZEROS.map((zero) => c.codePointAt(0)! - zero).find((d) => d >= 0 && d <= 9))
    .filter((d) => d !== undefined)
    .join('');

/** Every log line of the app, as text. */
class LogText {
  text = '';
  write(chunk: string): void {
    this.text += chunk;
  }
}

describe('card numbers are neither stored, sent nor logged (e2e)', () => {
  let t: TestApp;
  let ledger: Ledger;
  const log = new LogText();
  const http = () => request(t.app.getHttpServer());
  const post = (path: string, body: object, key: string = randomUUID()) => http().post(path).set(t.auth()).set('Idempotency-Key', key).send(body);
  /** What the app wrote where a card number must never be: every row of every table (as text), the network's ledger, the log. */
  const written = async () => {
    let text = log.text;
    const tables = await t.dataSource.query<{ table_name: string }[]>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    );
    for (const { table_name } of tables) {
      const [{ rows }] = await t.dataSource.query<{ rows: string }[]>(`SELECT coalesce(string_agg(t::text, E'\\n'), '') AS rows FROM "${table_name}" t`);
      text += rows;
    }
    return text + JSON.stringify(await ledger.intents());
  };
  /** Waits for the request line of every request sent so far (a 404's line is written after theirs). */
  const flush = async () => {
    const id = `flush-${randomUUID()}`;
    await http().get('/no-such-route').set(t.auth()).set('X-Request-Id', id).expect(404);
    await waitFor(`the request line of ${id}`, () => log.text.includes(`"reqId":"${id}"`) || undefined);
  };

  beforeAll(async () => {
    t = await createTestApp({ env: { LOG_LEVEL: 'info' }, overrides: [{ provide: LOG_DESTINATION, useValue: log }] });
    ledger = Ledger.of(t);
  });
  afterAll(() => t?.close());

  const refusedValues: string[] = [];
  const expectRefused = (res: request.Response, field: string, value: string) => {
    refusedValues.push(value);
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ code: 'validation_failed' });
    expect((res.body as { errors: { field: string }[] }).errors.map((e) => e.field)).toEqual([field]);
    expect(digitsOf(res.text)).not.toContain(digitsOf(value));
  };

  it.each([
    'tok_4242_4242_4242_4242',
    '4242 4242 4242 4242',
    '4000-0566-5566-5556',
    'pm_5555.5555.5555.4444',
    'tok_4111111111111111',
    'pm_6011/0009/9013/9424',
    '378282246310005',
  ])('refuses the source %j', async (source) => {
    expectRefused(await post('/payments', paymentBody({ source })), 'source', source);
  });

  it.each([
    'card 4000 0025 0000 3155 exp 12/30 cvc 123',
    inDigits('card 4000 0025 0000 3155', ZEROS[1]), // Arabic-Indic
    inDigits('card 4000-0025-0000-3155', ZEROS[2]), // Devanagari
    `card 4000${inDigits('0025', ZEROS[1])}0000${inDigits('3155', ZEROS[2])}`, // mixed with ASCII
    'card 4000\u20130025\u20130000\u20133155', // en dashes
    'Order 1001: 4000 0025 0000 3155, 2 items', // beside other numbers
  ])('refuses a description holding a card number: %j', async (description) => {
    expectRefused(await post('/payments', paymentBody({ description })), 'description', description);
  });

  it("refuses an order item's sku holding a card number", async () => {
    const sku = 'sku-5105-1051-0510-5100';
    expectRefused(await post('/orders', orderBody({ items: [{ sku, quantity: 1, unit_amount: 500 }] })), 'items[0].sku', sku);
  });

  it.each([
    ['/payments', '4012 8888 8888 1881'],
    ['/orders', '3056_9309_0259_04'],
    ['/orders', '"6200000000000005"'],
    ['/payments', 'retry-2 4000056655665556'], // one group beside another
    ['/orders', '5200-8282-8282-8210'],
  ])('refuses an Idempotency-Key holding a card number (POST %s, %j)', async (path, key) => {
    expectRefused(await post(path, path === '/payments' ? paymentBody() : orderBody(), key), 'Idempotency-Key', key);
  });

  it('stored nothing, sent nothing to the card network, logged no card number', async () => {
    await flush();
    expect(await countRows(t.dataSource, 'payments')).toBe(0);
    expect(await countRows(t.dataSource, 'orders')).toBe(0);
    expect(await countRows(t.dataSource, 'idempotency_keys')).toBe(0);
    expect(await ledger.intents()).toEqual([]);
    // Each refusal has its request line (a 400 is a warning), without the refused value.
    expect(log.text.split('\n').filter((l) => l.includes('"statusCode":400'))).toHaveLength(refusedValues.length);
    const text = await written();
    for (const value of refusedValues) {
      expect(text).not.toContain(value);
      expect(digitsOf(text)).not.toContain(digitsOf(value));
    }
  });

  it('accepts numbers that are not card numbers: order, tracking and phone numbers, an invoice, a timestamp, a timestamped key, an EAN-13 SKU, a UUID key', async () => {
    const notCards = [
      'Order #1001, ref 2024-0042',
      'ticket 1234 5678 1234 5678',
      'id 11526567-9425-4659-ae51-363ac20b35b6',
      'tracking 9400 1000 0000 0000 0000 00',
      'call +86 138 0007 8000',
      'Invoice 2026-12-05 #100005',
      '1797292800000',
    ];
    for (const description of notCards) {
      const res = await post('/payments', paymentBody({ description }));
      expect(res.status).toBe(201);
      expect(res.body.description).toBe(description);
    }
    expect((await ledger.intents()).map((i) => i.description).sort()).toEqual([...notCards].sort());
    await post('/orders', orderBody({ items: [{ sku: 'sku-1234567812345678', quantity: 1, unit_amount: 500 }] })).expect(201);
    await post('/orders', orderBody(), '1234567812345678').expect(201);
    await post('/orders', orderBody(), 'order-1001').expect(201);
    await post('/orders', orderBody(), 'order-1764979200000-7').expect(201);
    expect((await http().get('/idempotency-keys/order-1764979200000-7').set(t.auth()).expect(200)).body).toMatchObject({ key: 'order-1764979200000-7' });
    const order = await post('/orders', orderBody({ items: [{ sku: '4006381333924', quantity: 1, unit_amount: 500 }] })).expect(201);
    expect(order.body.items[0].sku).toBe('4006381333924');
    await post('/payments', paymentBody({ source: 'pm_card_visa' }), '11526567-9425-4659-ae51-363ac20b35b6').expect(201);
  });
});

/**
 * Where a request's input comes back, in an answer or in the log, a card
 * number in it is redacted (or the value is not used): X-Request-Id, query
 * strings and path values, GET /idempotency-keys/{key}, validation messages
 * (unknown field names too), GraphQL errors.
 */
describe('card numbers are never echoed (e2e)', () => {
  let t: TestApp;
  const log = new LogText();
  const http = () => request(t.app.getHttpServer());
  const card = '4000 0566 5566 5556';
  /** Every card number sent by these tests, for the check of the log at the end. */
  const sent: string[] = [];
  /** A response's headers and body, as text, hold none of `values`' digits. */
  const expectNoEcho = (res: request.Response, ...values: string[]) => {
    sent.push(...values);
    const text = JSON.stringify(res.headers) + res.text;
    for (const value of values) {
      expect(text).not.toContain(value);
      expect(digitsOf(text)).not.toContain(digitsOf(value));
    }
  };

  beforeAll(async () => {
    t = await createTestApp({ env: { LOG_LEVEL: 'info' }, overrides: [{ provide: LOG_DESTINATION, useValue: log }] });
  });
  afterAll(() => t?.close());

  it('an X-Request-Id holding a card number is not used: a fresh id is answered and logged', async () => {
    const res = await http().get('/orders').set(t.auth()).set('X-Request-Id', 'req-4000056655665556').expect(200);
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-/);
    expectNoEcho(res, '4000056655665556');
  });

  it.each([
    ['a path value', `/orders/${encodeURIComponent(card)}`, 404],
    ['a path value, Arabic-Indic digits', `/orders/${encodeURIComponent(inDigits(card, ZEROS[1]))}`, 404],
    ['an unknown route', '/no-such-route/4000-0566-5566-5556', 404],
    ['a query string', '/orders?limit=4000056655665556', 400],
    ['a query string, percent-encoded digits', '/orders?limit=%34%30%30%30%30%35%36%36%35%35%36%36%35%35%35%36', 400],
    ['an unknown query parameter', '/orders?4000056655665556=1', 400],
    ['GET /idempotency-keys/{key}', `/idempotency-keys/${encodeURIComponent(`key ${card}`)}`, 400],
    ['GET /idempotency-keys/{key}, Devanagari digits', `/idempotency-keys/${encodeURIComponent(inDigits(card, ZEROS[2]))}`, 400],
  ])('%s: answered without the number', async (_name, path, status) => {
    const res = await http().get(path).set(t.auth());
    expect(res.status).toBe(status);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expectNoEcho(res, card, digitsOf(card));
  });

  it('GET /idempotency-keys/{key} holding a card number: 400 on `key`, a clean key is still answered', async () => {
    const refused = await http().get(`/idempotency-keys/${encodeURIComponent(card)}`).set(t.auth()).expect(400);
    expect(refused.body).toMatchObject({ code: 'validation_failed', errors: [{ field: 'key' }] });
    const key = randomUUID();
    expect((await http().get(`/idempotency-keys/${key}`).set(t.auth()).expect(200)).body).toEqual({ key, state: 'unknown' });
  });

  it('an unknown field named by a card number: the field is named redacted', async () => {
    const res = await http()
      .post('/orders')
      .set(t.auth())
      .set('Idempotency-Key', randomUUID())
      .send({ ...orderBody(), [card]: 1 });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'validation_failed', errors: [{ field: '[card number]' }] });
    expectNoEcho(res, card);
  });

  it.each([
    ['an unknown input field (variables)', { query: 'mutation($input: CreateOrderInput!) { createOrder(input: $input) { id } }', variables: { input: { ...orderBody(), [card]: 1 } } }],
    ['an unknown input field (literal)', { query: `mutation { createOrder(input: { currency: "USD", items: [], _${digitsOf(card)}: 1 }) { id } }` }],
    ['a value of the wrong type', { query: 'mutation($input: CreateOrderInput!) { createOrder(input: $input) { id } }', variables: { input: orderBody({ items: [{ sku: 'a', quantity: card, unit_amount: 1 }] }) } }],
    ['a syntax error', { query: `{ order(id: "x") { id } ${digitsOf(card)} }` }],
    ['a card number in a field checked by the app', { query: 'mutation($input: CreateOrderInput!) { createOrder(input: $input) { id } }', variables: { input: orderBody({ items: [{ sku: `sku ${card}`, quantity: 1, unit_amount: 1 }] }) } }],
    ['a path value (an order id)', { query: `{ order(id: "${card}") { id } }` }],
  ])('GraphQL, %s: the error carries no card number', async (_name, body) => {
    const res = await graphql(t.app.getHttpServer(), t.auth(), body, randomUUID());
    expect((res.body as GraphqlAnswer).errors?.length).toBeGreaterThan(0);
    expectNoEcho(res, card, digitsOf(card));
  });

  it('logged none of them', async () => {
    const id = `flush-${randomUUID()}`;
    await http().get('/no-such-route').set(t.auth()).set('X-Request-Id', id).expect(404);
    await waitFor(`the request line of ${id}`, () => log.text.includes(`"reqId":"${id}"`) || undefined);
    expect(log.text).toContain('[card number]');
    for (const value of sent) expect(digitsOf(log.text)).not.toContain(digitsOf(value));
  });
});
