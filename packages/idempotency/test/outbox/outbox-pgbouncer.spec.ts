import { PGBOUNCER_MISSING, pgbouncerBinary, startPgBouncer } from '../support/pgbouncer';
import { createDatabase } from '../support/test-services';
import {
  OutboxProducer,
  Receiver,
  buildLibrary,
  children,
  kill,
  startChild,
  startOutboxProducer,
  until,
} from '../support/outbox-processes';

/**
 * The library's outbox relay behind a real PgBouncer in transaction mode: two
 * relay processes whose only connection is the pooler (no LISTEN: they poll),
 * delivering to a real HTTP receiver; every message once, each stream in order.
 */
describe('the outbox relay behind PgBouncer in transaction mode (e2e)', () => {
  beforeAll(() => {
    if (!pgbouncerBinary()) throw new Error(PGBOUNCER_MISSING);
    buildLibrary();
  }, 120_000);

  it('relays through PgBouncer in transaction mode (polling, no session), every message once and in order', async () => {
    const db = await createDatabase();
    const bouncer = await startPgBouncer({ serverUrl: process.env.TEST_ADMIN_DATABASE_URL!, poolSize: 2 });
    const receiver = new Receiver();
    let producer: OutboxProducer | undefined;
    try {
      producer = await startOutboxProducer(db.url);
      await receiver.start();
      const relay = () => startChild({ OUTBOX_MODE: 'relay', DATABASE_URL: bouncer.url(db.name), RECEIVER_URL: receiver.url, TRANSACTION_POOLER: '1' }, 'ready');
      await Promise.all([relay(), relay()]);
      receiver.answer = (d) => (d.attempt === 1 && receiver.of(d.id).length === 0 && Math.random() < 0.3 ? 'fail' : 'ok');
      const ids: string[] = [];
      for (let i = 0; i < 30; i += 1) ids.push(await producer.add({ stream: `order-${i % 3}`, payload: { i } }));
      await until(async () => (await producer!.undelivered(ids)) === 0, 90_000);
      const okOrder = receiver.deliveries.filter((d) => d.answer === 'ok').map((d) => ids.indexOf(d.id));
      for (let s = 0; s < 3; s += 1) expect(okOrder.filter((i) => i % 3 === s)).toEqual(ids.map((_, i) => i).filter((i) => i % 3 === s));
      expect(receiver.effects.size).toBe(ids.length);
    } finally {
      await Promise.all([...children].map(kill));
      await receiver.close();
      await producer?.close();
      await bouncer.stop();
      await db.drop();
    }
  }, 120_000);

});
