import { randomUUID } from 'node:crypto';
import { IDEMPOTENCY_POSTGRES_STORE, idempotencyStoreOf } from 'safe-retries/testing';
import { NaiveIdempotencyStore } from '../../../packages/idempotency/test/support/naive-idempotency.store';
import { TestApp, createTestApp } from '../../support/app';
import { orderBody } from '../../support/fixtures';
import { GraphqlAnswer, createOrderMutation, errorCode } from '../../support/graphql';
import { Attempt, History, checkHistory, digest, keyOf } from '../../support/history';
import { TimedResponse, peakConcurrency, timed } from '../../../packages/idempotency/test/support/race';

/**
 * The claim of the HTTP race suites, over GraphQL: N identical createOrder
 * mutations with one fresh Idempotency-Key, truly concurrent, create exactly
 * one order, every run; every answer is that order (the original or a replay)
 * or the GraphQL error IDEMPOTENCY_KEY_IN_USE. RACE_RUNS sets the runs. The
 * same race against the naive check-then-insert store creates two orders on
 * its first run. Every race is also checked by the history checker
 * (test/support/history.ts): an order answered is a 201, IDEMPOTENCY_KEY_IN_USE
 * a 409.
 */
const RUNS = Number(process.env.RACE_RUNS ?? 3);
const N = 100;

type CreateOrderAnswer = GraphqlAnswer<{ createOrder: { id: string } }>;

/** The one API client of these races (the history checker's scope). */
const CLIENT = 'test';

/** One race; the orders are counted by the race's own sku, whatever the answers say, and the race is recorded as a history. */
async function race(t: TestApp): Promise<{ responses: TimedResponse[]; orders: number; history: History }> {
  const key = randomUUID();
  const sku = `race-${key}`;
  const input = orderBody({ items: [{ sku, quantity: 1, unit_amount: 500 }] });
  const responses = await Promise.all(Array.from({ length: N }, () => timed(createOrderMutation(t.url!, t.auth(), key, input))));
  const ids = ((await t.dataSource.query('SELECT id::text FROM orders WHERE items @> $1::jsonb', [JSON.stringify([{ sku }])])) as { id: string }[]).map((r) => r.id);
  const attempts = responses.map((r): Attempt => {
    const answer = r.json<CreateOrderAnswer>();
    const order = answer.data?.createOrder;
    const code = errorCode(answer);
    const status = order ? 201 : code === 'IDEMPOTENCY_KEY_IN_USE' ? 409 : 500;
    return { client: CLIENT, key, body: digest(JSON.stringify(input)), started: r.started, ended: r.ended, status, answer: order && digest(JSON.stringify(order)), id: order?.id, code, replayed: r.headers['idempotent-replayed'] === 'true' };
  });
  const history: History = { attempts, ends: new Map([[keyOf(CLIENT, key), { effects: ids.length, recorded: ids }]]) };
  return { responses, orders: ids.length, history };
}

/** The answers by kind: the original, replays, IDEMPOTENCY_KEY_IN_USE, anything else. */
function kinds(responses: TimedResponse[]): Record<string, number> {
  const h: Record<string, number> = {};
  for (const r of responses) {
    const answer = r.json<CreateOrderAnswer>();
    const label = answer.data?.createOrder ? (r.headers['idempotent-replayed'] === 'true' ? 'replay' : 'original') : (errorCode(answer) ?? `http ${r.status}`);
    h[label] = (h[label] ?? 0) + 1;
  }
  return h;
}

describe('race: identical concurrent GraphQL createOrder mutations (e2e)', () => {
  jest.setTimeout(300_000);

  describe('with the real store', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp({ listen: true, env: { DATABASE_POOL_SIZE: '20' } });
    });
    afterAll(() => t.close());

    it(`N=${N}: exactly one order per run; every answer is that order or IDEMPOTENCY_KEY_IN_USE`, async () => {
      for (let run = 1; run <= RUNS; run++) {
        const { responses, orders, history } = await race(t);
        expect(checkHistory(history, { mayRunOnForMs: 0 })).toEqual([]);
        const peak = peakConcurrency(responses);
        console.log(`graphql race N=${N} run ${run}/${RUNS}: ${JSON.stringify(kinds(responses))} peak in flight ${peak}`);

        expect(orders).toBe(1);
        const answers = responses.map((r) => ({ r, answer: r.json<CreateOrderAnswer>() }));
        const originals = answers.filter(({ r, answer }) => answer.data?.createOrder && r.headers['idempotent-replayed'] === undefined);
        expect(originals).toHaveLength(1);
        const id = originals[0].answer.data!.createOrder.id;
        for (const { r, answer } of answers) {
          expect(r.status).toBe(200);
          if (answer.data?.createOrder) {
            expect(answer.data.createOrder.id).toBe(id);
            expect(answer.errors).toBeUndefined();
          } else {
            expect(errorCode(answer)).toBe('IDEMPOTENCY_KEY_IN_USE');
            expect(answer.errors![0].extensions!.retryAfter).toBe(1);
          }
        }
        // The requests really overlapped: most were in flight at the same time.
        expect(peak).toBeGreaterThanOrEqual(Math.floor(N / 2));
      }
    });
  });

  describe('with a deliberately naive check-then-insert store (the suite has teeth)', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp({
        listen: true,
        env: { DATABASE_POOL_SIZE: '20' },
        overrides: [{ provide: IDEMPOTENCY_POSTGRES_STORE, useClass: NaiveIdempotencyStore }],
      });
    });
    afterAll(() => t.close());

    it(`N=${N}: the first run creates more than one order for one key`, async () => {
      // Two of the N find no row and both wait before writing: both are inside the
      // naive store's check-then-write window at once, so the second order is certain.
      (idempotencyStoreOf(t.app).store as NaiveIdempotencyStore).holdClaimWindow(2);
      const { responses, orders, history } = await race(t);
      expect(checkHistory(history, { mayRunOnForMs: 0 }).join('\n')).toMatch(/effects for one key|more than one original/);
      console.log(`naive store graphql N=${N}: ${orders} orders, ${JSON.stringify(kinds(responses))}`);
      expect(orders).toBeGreaterThanOrEqual(2);
      const ids = responses.flatMap((r) => {
        const answer = r.json<CreateOrderAnswer>();
        return answer.data?.createOrder && r.headers['idempotent-replayed'] === undefined ? [answer.data.createOrder.id] : [];
      });
      expect(new Set(ids).size).toBeGreaterThanOrEqual(2);
    });
  });
});
