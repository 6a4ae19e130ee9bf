import request from 'supertest';
import { CLIENT_B, TestApp, createTestApp } from '../support/app';
import { createOrder, createPayment } from '../support/fixtures';

/**
 * Keyset pagination never loses or repeats an item, even when many items share a
 * millisecond of created_at (microseconds in PostgreSQL, milliseconds in a JS
 * Date: a cursor that passed through a Date skips the rows of its millisecond).
 */
describe('listings walk every item exactly once (e2e)', () => {
  let t: TestApp;
  const http = () => request(t.app.getHttpServer());

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  /** Follows next_cursor from the first page to the last; every id seen, in order. */
  async function walk(path: string, limit: number, client?: { key: string }): Promise<string[]> {
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 10_000; pages++) {
      const query: string = `?limit=${limit}${cursor ? `&starting_after=${cursor}` : ''}`;
      const res = await http().get(`${path}${query}`).set(t.auth(client)).expect(200);
      const body = res.body as { data: { id: string }[]; has_more: boolean; next_cursor: string | null };
      seen.push(...body.data.map((d) => d.id));
      if (!body.has_more) {
        expect(body.next_cursor).toBeNull();
        return seen;
      }
      cursor = body.next_cursor;
    }
    throw new Error('the listing never ended');
  }

  /** Creates `total` items with `concurrency` requests in flight at once. */
  async function createConcurrently(total: number, concurrency: number, create: () => Promise<{ id: string }>): Promise<string[]> {
    const ids: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < total) {
          next++;
          ids.push((await create()).id);
        }
      }),
    );
    return ids;
  }

  /** How many rows share their created_at millisecond with another row of the table. */
  async function rowsSharingAMillisecond(table: 'orders' | 'payments'): Promise<number> {
    const [row] = await t.dataSource.query<{ n: string }[]>(
      `SELECT coalesce(sum(n), 0)::text AS n FROM (
         SELECT count(*) AS n FROM ${table} GROUP BY date_trunc('milliseconds', created_at) HAVING count(*) > 1) s`,
    );
    return Number(row.n);
  }

  it.each([
    ['payments', () => createPayment(t)],
    ['orders', () => createOrder(t)],
  ] as const)('%s created by concurrent clients appear exactly once at every page size', async (table, create) => {
    const created = await createConcurrently(400, 24, create);
    // Whether concurrent requests land in one millisecond depends on timing (on
    // how many round trips a transaction takes before its now(), for one): the
    // rows are crowded into shared milliseconds, 8 to a millisecond, each at a
    // microsecond of its own in an order unrelated to their ids.
    await t.dataSource.query(
      `UPDATE ${table} t
          SET created_at = timestamptz '2026-11-30 12:00:00+00' + (s.rn / 8) * interval '1 millisecond' + ((s.rn * 5) % 8) * interval '1 microsecond'
         FROM (SELECT id, row_number() OVER (ORDER BY md5(id::text)) - 1 AS rn FROM ${table}) s
        WHERE t.id = s.id`,
    );
    expect(await rowsSharingAMillisecond(table)).toBe(created.length);

    for (const limit of [1, 7, 100]) {
      const seen = await walk(`/${table}`, limit);
      expect(seen).toHaveLength(created.length);
      expect(new Set(seen).size).toBe(seen.length);
      expect(new Set(seen)).toEqual(new Set(created));
    }
    // A guard, not a measure: about 900 requests, slow on a loaded host.
  }, 180_000);

  it('orders rows that differ only in microseconds, and rows with equal created_at by id', async () => {
    const [{ id: clientId }] = await t.dataSource.query<{ id: string }[]>('SELECT id FROM clients WHERE name = $1', [CLIENT_B.name]);
    // 30 rows one microsecond apart and 10 rows at one instant, all in one millisecond.
    const inserted = await t.dataSource.query<{ id: string; created_at_us: string }[]>(
      `INSERT INTO orders (client_id, status, currency, amount_total, items, created_at)
       SELECT $1, 'pending', 'usd', 100, '[{"sku":"s","quantity":1,"unit_amount":100}]'::jsonb,
              timestamptz '2026-11-30 12:00:00.000100+00' + make_interval(secs => least(g, 30) / 1000000.0)
         FROM generate_series(1, 40) g
       RETURNING id::text, (extract(epoch FROM created_at) * 1000000)::int8::text AS created_at_us`,
      [clientId],
    );
    expect(new Set(inserted.map((r) => r.created_at_us)).size).toBe(30);
    // Newest first, then the greater id first (uuids compare as their lower-case hex).
    const newestFirst = (a: (typeof inserted)[number], b: (typeof inserted)[number]) =>
      Number(BigInt(b.created_at_us) - BigInt(a.created_at_us)) || (b.id > a.id ? 1 : b.id < a.id ? -1 : 0);
    const expected = [...inserted].sort(newestFirst).map((r) => r.id);

    for (const limit of [1, 3, 40, 100]) {
      expect(await walk('/orders', limit, CLIENT_B)).toEqual(expected);
    }
  });

  it('answers 400 invalid_cursor for a cursor that is not an item of the caller', async () => {
    const order = await createOrder(t);
    const res = await http().get(`/orders?starting_after=${order.id}`).set(t.auth(CLIENT_B)).expect(400);
    expect(res.body.code).toBe('invalid_cursor');
    const mine = await http().get(`/orders?starting_after=${order.id}`).set(t.auth()).expect(200);
    expect(mine.body.data.map((o: { id: string }) => o.id)).not.toContain(order.id);
  });
});
