import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { RefundSettlementJob, RefundSettlementResult } from '../../src/payments/refunds/refund-settlement.job';
import { TestApp, createTestApp } from '../support/app';
import { CardNetworkProcess, networkAppEnv, startCardNetworkProcess } from '../support/card-network';
import { paymentBody } from '../support/fixtures';

/**
 * The lease on the refund settlement's one cursor, between three app
 * instances on one database (each with its own pools), their runs started by
 * the suite: three runs at once make one walk (the claim is one statement;
 * the row lock decides); the holder keeps the walk at its next runs while the
 * others skip; an expired lease is taken over by the next instance that runs;
 * a closed instance gives the lease up at once. (Going on from the stored
 * cursor after a crash or a deploy: fault/refund-settlement-instances.spec.ts.)
 */
jest.setTimeout(120_000);

const REFUNDS = 4;

describe('the refund settlement lease (e2e)', () => {
  let network: CardNetworkProcess;
  const apps: TestApp[] = [];
  const run = (i: number) => apps[i].app.get(RefundSettlementJob).runOnce();
  const walkers = (results: RefundSettlementResult[]) => results.flatMap((r, i) => (r.walked ? [i] : []));
  /** Ends the lease where it stands, as if its holder had stopped renewing it long enough ago (the database's clock). */
  const expireLease = () => apps[0].dataSource.query('UPDATE refund_settlement_cursor SET lease_until = now()');

  beforeAll(async () => {
    network = await startCardNetworkProcess();
    const env = networkAppEnv(network);
    apps.push(await createTestApp({ env }));
    for (let i = 1; i < 3; i++) apps.push(await createTestApp({ env, database: apps[0].db }));
    const http = () => request(apps[0].app.getHttpServer());
    for (let i = 0; i < REFUNDS; i++) {
      const paid = await http().post('/payments').set(apps[0].auth()).set('Idempotency-Key', randomUUID()).send(paymentBody()).expect(201);
      await http().post(`/payments/${paid.body.id}/refunds`).set(apps[0].auth()).set('Idempotency-Key', randomUUID()).send({}).expect(201);
    }
  });

  afterAll(async () => {
    for (const app of apps.slice(1).reverse()) await app.close();
    await apps[0]?.close();
    await network?.stop();
  });

  it('three runs at once: one instance walks, the others skip; the holder keeps the walk', async () => {
    const first = await Promise.all([run(0), run(1), run(2)]);
    expect(walkers(first)).toHaveLength(1);
    expect(first.reduce((n, r) => n + r.checked, 0)).toBe(REFUNDS);
    const [holder] = walkers(first);

    const again = await Promise.all([run(0), run(1), run(2)]);
    expect(walkers(again)).toEqual([holder]);
    expect(again[holder]).toMatchObject({ checked: REFUNDS, settled: 0, failed: 0 });
  });

  it('an expired lease is taken over by the next instance that runs; the old holder then skips', async () => {
    const [holder] = walkers(await Promise.all([run(0), run(1), run(2)]));
    const other = (holder + 1) % 3;
    expect(await run(other)).toMatchObject({ walked: false, checked: 0 });
    await expireLease();
    expect(await run(other)).toMatchObject({ walked: true, checked: REFUNDS });
    expect(await run(holder)).toMatchObject({ walked: false, checked: 0 });
  });

  it('a closed instance gives the lease up: another walks at once', async () => {
    await expireLease();
    expect(await run(1)).toMatchObject({ walked: true });
    // Not the first app: closing it would drop the database the others share.
    const [closed] = apps.splice(1, 1);
    await closed.close();
    expect(await apps[0].dataSource.query('SELECT holder FROM refund_settlement_cursor')).toEqual([{ holder: null }]);
    expect(walkers(await Promise.all([run(0), run(1)]))).toHaveLength(1);
  });
});
