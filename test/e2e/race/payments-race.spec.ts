import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { PostgresIdempotencyStore } from '../../../packages/idempotency/src/postgres/postgres-idempotency.store';
import { TestApp, countRows, createTestApp } from '../../support/app';
import { Ledger } from '../../support/card-network';
import { paymentBody } from '../../support/fixtures';
import { NaiveIdempotencyStore } from '../../../packages/idempotency/test/support/naive-idempotency.store';
import { TimedResponse, histogram, peakConcurrency, timed } from '../../support/race';

/**
 * The project's claim: N identical POST /payments with one fresh key, truly
 * concurrent, charge exactly once, every run. RACE_RUNS sets R (npm test runs
 * a few, `npm run test:race` runs 20). The same race against a deliberately
 * naive check-then-insert store, with two requests held inside its window,
 * double-charges on its first run: the race reaches the card network.
 */
const RUNS = Number(process.env.RACE_RUNS ?? 3);
const SIZES = [50, 100];

/** One race; `charges` is counted at the card network's ledger, whatever our tables say. */
async function race(t: TestApp, n: number): Promise<{ responses: TimedResponse[]; payments: number; charges: number; key: string }> {
  const key = randomUUID();
  const description = `race ${key}`;
  const body = paymentBody({ amount: 777, description });
  const responses = await Promise.all(
    Array.from({ length: n }, () => timed(request(t.url!).post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body))),
  );
  const payments = await countRows(t.dataSource, 'payments', 'description = $1', [description]);
  const charges = (await Ledger.of(t).chargesDescribed(description)).length;
  return { responses, payments, charges, key };
}

describe('race: identical concurrent payments (e2e)', () => {
  jest.setTimeout(300_000);

  describe('with the real store', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp({ listen: true, env: { CARD_NETWORK_DELAY: '50ms', DATABASE_POOL_SIZE: '20' } });
    });
    afterAll(() => t.close());

    it.each(SIZES)('N=%i: exactly one payment per run; every answer is the original, a replay of it, or 409', async (n) => {
      for (let run = 1; run <= RUNS; run++) {
        const { responses, payments, charges } = await race(t, n);
        const peak = peakConcurrency(responses);
        const spanMs = Math.max(...responses.map((r) => r.ended)) - Math.min(...responses.map((r) => r.started));
        console.log(`race N=${n} run ${run}/${RUNS}: ${JSON.stringify(histogram(responses))} peak in flight ${peak}, all answered in ${spanMs.toFixed(0)} ms`);

        expect(payments).toBe(1);
        expect(charges).toBe(1);
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
        overrides: [{ provide: PostgresIdempotencyStore, useClass: NaiveIdempotencyStore }],
      });
    });
    afterAll(() => t.close());

    it.each(SIZES)('N=%i: the first run charges more than once for one key', async (n) => {
      // Two of the N find no row and both wait before writing: both are inside the
      // naive store's check-then-write window at once, so the double charge is certain.
      t.app.get<NaiveIdempotencyStore>(PostgresIdempotencyStore).holdClaimWindow(2);
      const { responses, payments, charges } = await race(t, n);
      console.log(`naive store N=${n}: ${payments} payments, ${charges} charges, ${JSON.stringify(histogram(responses))}`);
      expect(charges).toBeGreaterThanOrEqual(2);
      const originals = responses.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined);
      expect(new Set(originals.map((r) => r.json<{ id: string }>().id)).size).toBeGreaterThanOrEqual(2);
    });
  });
});
