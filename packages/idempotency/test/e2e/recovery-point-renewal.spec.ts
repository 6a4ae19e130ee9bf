import { randomUUID } from 'node:crypto';
import { Controller, Module, Post } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import request from 'supertest';
import { Idempotent, Operation, PhasedOperation } from 'safe-retries';
import { LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from '../support/library-app';

/**
 * A recovery point sent with its phase's COMMIT (a pipelined client) is
 * answered after its statement has resolved: no renewal of the lease may start
 * before the phase's transaction has ended, or it could change the token the
 * recovery point matches on before the server has run it (the phase would
 * then be refused, its work rolled back). The window is held open on a real
 * PostgreSQL: the phase leaves its connection busy (a statement it does not
 * wait for), so the recovery point, sent after it, runs only when that ends,
 * long after the lease's renewals (every third of 300 ms) would have come.
 * After the phase the lease is renewed again: the next phase outlasts the
 * lease and still calls out.
 */
@Controller('renewal')
class RenewalController {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  @Post()
  @Idempotent({ phased: 'renewal-probe', lease: '300ms' })
  async run(@Operation() op: PhasedOperation<{ phase: string }>) {
    await op.checkpoint(
      'busy',
      async () => {
        // Not awaited: the server is still on it when the recovery point is sent.
        void this.txHost.tx.query('SELECT pg_sleep(0.6)').catch(() => undefined);
        return 'busy';
      },
      (phase) => ({ phase }),
    );
    // Longer than the lease: only renewals keep it.
    await new Promise((resolve) => setTimeout(resolve, 700));
    const called = await op.call(async () => 'called');
    return op.finish(async () => ({ called }));
  }
}

@Module({ controllers: [RenewalController] })
class RenewalModule {}

describe.each([true, false])('a recovery point and the lease renewals, pipelined clients: %s (e2e)', (pipeline) => {
  let t: LibraryApp;

  beforeAll(async () => {
    t = await createLibraryApp('fastify', { pipeline, imports: [RenewalModule], idempotency: { replayCache: { enabled: false } } });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('renews no lease while the phase that sent the recovery point is open, and renews it again after', async () => {
    const res = await request(t.app.getHttpServer()).post('/renewal').set(PRINCIPAL_HEADER, 'client-a').set('Idempotency-Key', randomUUID()).send({});
    expect({ status: res.status, body: res.body as unknown }).toEqual({ status: 201, body: { called: 'called' } });
  });
});
