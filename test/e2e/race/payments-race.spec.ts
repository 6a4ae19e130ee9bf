import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { IDEMPOTENCY_POSTGRES_STORE, idempotencyStoreOf } from 'safe-retries/testing';
import { TestApp, createTestApp } from '../../support/app';
import { Ledger } from '../../support/card-network';
import { orderBody, paymentBody } from '../../support/fixtures';
import { NaiveIdempotencyStore } from '../../../packages/idempotency/test/support/naive-idempotency.store';
import { TimedResponse, histogram, peakConcurrency, timed } from '../../../packages/idempotency/test/support/race';
import { Attempt, History, checkHistory, digest, keyOf } from '../../support/history';
import { holdClientKey } from '../../support/keys';

/**
 * The project's claim: N identical requests with one fresh key, truly
 * concurrent, take effect exactly once, every run. RACE_RUNS sets R (npm test
 * runs a few, `npm run test:race` runs 20). Each commit mode has its route:
 * POST /payments (phased, the durable claim: the effect that counts is the
 * charge at the card network) and POST /orders (`commit: 'one'`, the claim
 * inside its transaction: the effect is the order row). Every run of
 * POST /payments holds its key's row uncommitted until claims wait on it, so
 * that several claims meet in the one window the claim leaves
 * (packages/idempotency/test/support/claim-window.ts): left to timing they almost never do, so a
 * claim that let two of them own the key (`ON CONFLICT DO UPDATE` for
 * `DO NOTHING`) would pass unseen. With it, the second owner's lease fences
 * out the first, which answers 409 idempotency_lease_lost: no 409 here may be
 * anything but "in progress". The same race against a deliberately naive
 * check-then-insert store, with two requests held inside its window, takes
 * effect twice on its first run, in both modes. Every race
 * is also recorded and checked by the history checker (test/support/history.ts).
 */
const RUNS = Number(process.env.RACE_RUNS ?? 3);
const SIZES = [50, 100];

/** A route under race: what to send with a tag unique to the race, and its effects counted by that tag. */
interface RaceRoute {
  name: string;
  path: string;
  body(tag: string): object;
  /** Its claim is the durable one (statements.ts), whose window a run holds open (packages/idempotency/test/support/claim-window.ts). */
  durableClaim: boolean;
  /** Ids of the rows the route wrote, and (payments) charges the card network made. */
  effects(t: TestApp, tag: string): Promise<{ ids: string[]; charges?: number }>;
}

const ids = async (t: TestApp, sql: string, params: unknown[]): Promise<string[]> =>
  ((await t.dataSource.query(sql, params)) as { id: string }[]).map((r) => r.id);

const ROUTES: RaceRoute[] = [
  {
    name: 'POST /payments (phased, durable claim)',
    path: '/payments',
    body: (tag) => paymentBody({ amount: 777, description: tag }),
    durableClaim: true,
    effects: async (t, tag) => ({
      ids: await ids(t, 'SELECT id::text FROM payments WHERE description = $1', [tag]),
      // Counted at the card network's ledger, whatever our tables say.
      charges: (await Ledger.of(t).chargesDescribed(tag)).length,
    }),
  },
  {
    name: "POST /orders (commit 'one')",
    path: '/orders',
    durableClaim: false,
    body: (tag) => orderBody({ items: [{ sku: tag, quantity: 1, unit_amount: 777 }] }),
    effects: async (t, tag) => ({ ids: await ids(t, 'SELECT id::text FROM orders WHERE items @> $1::jsonb', [JSON.stringify([{ sku: tag }])]) }),
  },
];

/** One race of `n` identical requests with a fresh key, then a lookup of the key: recorded as a history. */
async function race(
  t: TestApp,
  route: RaceRoute,
  n: number,
  hold = false,
): Promise<{ responses: TimedResponse[]; rows: number; charges?: number; history: History; met?: number }> {
  const key = randomUUID();
  const tag = `race_${key.replace(/-/g, '')}`.slice(0, 40);
  const body = route.body(tag);
  const held = hold ? await holdClientKey(t.db.url, key) : undefined;
  const sent = Promise.all(
    Array.from({ length: n }, () => timed(request(t.url!).post(route.path).set(t.auth()).set('Idempotency-Key', key).send(body))),
  );
  let met: number | undefined;
  try {
    met = await held?.claimsWaiting(2);
  } finally {
    await held?.release();
  }
  const responses = await sent;
  const lookup = await timed(request(t.url!).get(`/idempotency-keys/${key}`).set(t.auth()));
  const { ids: recorded, charges } = await route.effects(t, tag);
  const attempts = responses.map((r): Attempt => {
    const answer = r.json<{ id?: string; code?: string }>();
    const ok = r.status >= 200 && r.status < 300;
    return { client: CLIENT, key, body: digest(JSON.stringify(body)), started: r.started, ended: r.ended, status: r.status, answer: ok ? digest(r.text) : undefined, id: ok ? answer.id : undefined, code: answer.code, replayed: r.headers['idempotent-replayed'] === 'true' };
  });
  const { state, status } = lookup.json<{ state: 'unknown' | 'in_progress' | 'completed'; status?: number }>();
  const history: History = {
    attempts,
    lookups: [{ client: CLIENT, key, at: lookup.ended, state, status }],
    ends: new Map([[keyOf(CLIENT, key), { effects: charges ?? recorded.length, recorded }]]),
  };
  return { responses, rows: recorded.length, charges, history, met };
}

/** The one API client of these races (the history checker's scope). */
const CLIENT = 'test';

describe.each(ROUTES)('race: identical concurrent requests, $name (e2e)', (route) => {
  jest.setTimeout(300_000);

  describe('with the real store', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp({ listen: true, env: { CARD_NETWORK_DELAY: '50ms', DATABASE_POOL_SIZE: '20' } });
    });
    afterAll(() => t.close());

    it.each(SIZES)('N=%i: exactly one effect per run; every answer is the original, a replay of it, or 409', async (n) => {
      for (let run = 1; run <= RUNS; run++) {
        const { responses, rows, charges, history, met } = await race(t, route, n, route.durableClaim);
        expect(checkHistory(history, { mayRunOnForMs: 0 })).toEqual([]);
        const peak = peakConcurrency(responses);
        const spanMs = Math.max(...responses.map((r) => r.ended)) - Math.min(...responses.map((r) => r.started));
        const window = met === undefined ? '' : `, ${met} claims met in the claim's window`;
        console.log(`race N=${n} run ${run}/${RUNS}: ${JSON.stringify(histogram(responses))} peak in flight ${peak}, all answered in ${spanMs.toFixed(0)} ms${window}`);

        expect(rows).toBe(1);
        if (charges !== undefined) expect(charges).toBe(1);
        const originals = responses.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined);
        expect(originals).toHaveLength(1);
        const id = originals[0].json<{ id: string }>().id as string;
        for (const r of responses) {
          expect([201, 409]).toContain(r.status);
          if (r.status === 201) expect(r.json<{ id: string }>().id).toBe(id);
          if (r.status === 409) expect(r.json<{ code: string }>().code).toBe('idempotency_request_in_progress');
        }
        // The requests really overlapped: most were in flight at the same time.
        expect(peak).toBeGreaterThanOrEqual(Math.floor(n / 2));
      }
    });
  });

  describe('with a deliberately naive check-then-insert store (the suite has teeth)', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp({
        listen: true,
        env: { CARD_NETWORK_DELAY: '50ms', DATABASE_POOL_SIZE: '20' },
        overrides: [{ provide: IDEMPOTENCY_POSTGRES_STORE, useClass: NaiveIdempotencyStore }],
      });
    });
    afterAll(() => t.close());

    it.each(SIZES)('N=%i: the first run takes effect more than once for one key', async (n) => {
      // Two of the N find no row and both wait before writing: both are inside the
      // naive store's check-then-write window at once, so the double effect is certain.
      (idempotencyStoreOf(t.app).store as NaiveIdempotencyStore).holdClaimWindow(2);
      const { responses, rows, charges, history } = await race(t, route, n);
      expect(checkHistory(history, { mayRunOnForMs: 0 }).join('\n')).toMatch(/effects for one key|more than one original/);
      console.log(`naive store N=${n}: ${rows} rows, ${charges ?? '-'} charges, ${JSON.stringify(histogram(responses))}`);
      expect(rows).toBeGreaterThanOrEqual(2);
      if (charges !== undefined) expect(charges).toBeGreaterThanOrEqual(2);
      const originals = responses.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined);
      expect(new Set(originals.map((r) => r.json<{ id: string }>().id)).size).toBeGreaterThanOrEqual(2);
    });

    // The hold above makes the catch certain on the first run. Without it the race alone
    // catches the naive store in most runs: how many is printed, not asserted (it is timing).
    it('without the hold, N=100: the runs that catch it, counted and printed', async () => {
      let caught = 0;
      for (let run = 1; run <= RUNS; run++) {
        const { responses, history } = await race(t, route, 100);
        if (checkHistory(history, { mayRunOnForMs: 0 }).length > 0) caught++;
        expect(peakConcurrency(responses)).toBeGreaterThanOrEqual(50);
      }
      console.log(`naive store without the hold, N=100: caught in ${caught} of ${RUNS} runs`);
    });
  });
});
