import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { IdempotencyRecovery } from 'safe-retries';
import { TestApp, createTestApp } from '../../support/app';
import { CardNetworkProcess, startCardNetworkProcess } from '../../support/card-network';
import { paymentBody } from '../../support/fixtures';

/**
 * The recovery job runs on every instance. Two instances on one database and one
 * card network run it at the same moment over the same abandoned payments: each
 * operation is taken over by exactly one of them (SKIP LOCKED plus the lease
 * compare-and-set) and ends with exactly one charge and one recorded payment.
 */
jest.setTimeout(60_000);

const ABANDONED = 12;

describe('fault: the recovery job on two instances at once', () => {
  let network: CardNetworkProcess;
  let a: TestApp;
  let b: TestApp;

  beforeAll(async () => {
    network = await startCardNetworkProcess();
    const env = { CARD_NETWORK_URL: network.url, CARD_NETWORK_MAX_RETRIES: '0', CARD_NETWORK_TIMEOUT: '300ms', IDEMPOTENCY_JOBS: 'off' };
    a = await createTestApp({ env });
    b = await createTestApp({ env, database: a.db });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await network?.stop();
  });

  it('finishes every abandoned payment once, whichever instance takes it', async () => {
    const descriptions: string[] = [];
    await network.ledger.fault('hang', ABANDONED);
    for (let i = 0; i < ABANDONED; i++) {
      const description = `abandoned ${i} ${randomUUID()}`;
      descriptions.push(description);
      await request(a.app.getHttpServer())
        .post('/payments')
        .set(a.auth())
        .set('Idempotency-Key', randomUUID())
        .send(paymentBody({ amount: 100 + i, description }))
        .expect(503);
    }
    const processing = await a.dataSource.query<{ n: string }[]>(`SELECT count(*)::text AS n FROM payments WHERE status = 'processing'`);
    expect(Number(processing[0].n)).toBe(ABANDONED);

    const [ra, rb] = await Promise.all([a.app.get(IdempotencyRecovery).runOnce(), b.app.get(IdempotencyRecovery).runOnce()]);
    console.log(`recovery on two instances: a ${JSON.stringify(ra)}, b ${JSON.stringify(rb)}`);
    expect(ra.taken + rb.taken).toBe(ABANDONED);
    expect(ra.finished + rb.finished).toBe(ABANDONED);
    expect(ra.failed + rb.failed).toBe(0);

    const rows = await a.dataSource.query<{ description: string; status: string; network_charge_id: string }[]>(
      'SELECT description, status, network_charge_id FROM payments WHERE description = ANY($1)',
      [descriptions],
    );
    expect(rows.map((r) => r.status)).toEqual(Array(ABANDONED).fill('succeeded'));
    for (const row of rows) {
      const charges = await network.ledger.chargesDescribed(row.description);
      expect(charges.map((c) => c.id)).toEqual([row.network_charge_id]);
    }
    const open = await a.dataSource.query<{ n: string }[]>('SELECT count(*)::text AS n FROM idempotency_keys WHERE status IS NULL');
    expect(Number(open[0].n)).toBe(0);
    // Nothing is left for a later run.
    expect(await a.app.get(IdempotencyRecovery).runOnce()).toMatchObject({ taken: 0 });
  });
});
