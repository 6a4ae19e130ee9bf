import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { LOG_DESTINATION } from '../../src/logging/logging.constants';
import { TestApp, countRows, createTestApp } from '../support/app';
import { Ledger } from '../support/card-network';
import { orderBody, paymentBody } from '../support/fixtures';
import { waitFor } from '../support/http-client';

/**
 * A card number (13–19 digits passing Luhn, with any separators) is card data:
 * it is refused wherever a client can put one, before anything is stored, sent
 * to the card network or logged — a payment's source and description, an
 * order item's sku, the Idempotency-Key header. Numbers that are not card
 * numbers still go through.
 */
const digitsOf = (value: string) => value.replace(/\D/g, '');

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

  it('refuses a description holding a card number', async () => {
    const description = 'card 4000 0025 0000 3155 exp 12/30 cvc 123';
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

  it('accepts numbers that are not card numbers: order numbers, a 16-digit number with no part passing Luhn, a UUID key', async () => {
    const notCards = ['Order #1001, ref 2024-0042', 'ticket 1234 5678 1234 5678', 'id 11526567-9425-4659-ae51-363ac20b35b6'];
    for (const description of notCards) {
      const res = await post('/payments', paymentBody({ description }));
      expect(res.status).toBe(201);
      expect(res.body.description).toBe(description);
    }
    expect((await ledger.intents()).map((i) => i.description).sort()).toEqual([...notCards].sort());
    await post('/orders', orderBody({ items: [{ sku: 'sku-1234567812345678', quantity: 1, unit_amount: 500 }] })).expect(201);
    await post('/orders', orderBody(), '1234567812345678').expect(201);
    await post('/orders', orderBody(), 'order-1001').expect(201);
    await post('/payments', paymentBody({ source: 'pm_card_visa' }), '11526567-9425-4659-ae51-363ac20b35b6').expect(201);
  });
});
