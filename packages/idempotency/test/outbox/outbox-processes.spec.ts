import { randomUUID } from 'node:crypto';
import { Outbox } from 'safe-retries/outbox';
import { OutboxProducer, Receiver, buildLibrary, children, kill, startChild, startOutboxProducer, until } from '../support/outbox-processes';
import { createDatabase } from '../support/test-services';

/**
 * The outbox with real processes: relays are OS processes of their own (the
 * built library, support/outbox-process.js) that deliver to a real HTTP
 * receiver in this process, which deduplicates by the message id (the
 * Idempotency-Key its sender gives). Messages are added by an app of the
 * library in this process, each in a transaction of its own.
 */

describe('the outbox with real processes', () => {
  let db: { url: string; drop(): Promise<void> };
  let producer: OutboxProducer;
  let receiver: Receiver;

  beforeAll(async () => {
    buildLibrary();
    db = await createDatabase();
    producer = await startOutboxProducer(db.url);
    await producer.dataSource.query('CREATE TABLE naive_orders (id text PRIMARY KEY)');
  }, 120_000);
  afterAll(async () => {
    await Promise.all([...children].map(kill));
    await producer?.close();
    await db?.drop();
  });
  beforeEach(async () => {
    receiver = new Receiver();
    await receiver.start();
  });
  afterEach(async () => {
    await Promise.all([...children].map(kill));
    await receiver.close();
    // Every test starts from an empty outbox.
    await producer.dataSource.query('DELETE FROM idempotency_outbox');
  });

  const relay = (env: Record<string, string> = {}) => startChild({ OUTBOX_MODE: 'relay', DATABASE_URL: db.url, RECEIVER_URL: receiver.url, ...env }, 'ready');
  const add: OutboxProducer['add'] = (entry) => producer.add(entry);
  const undelivered: OutboxProducer['undelivered'] = (ids) => producer.undelivered(ids);

  it('delivers again after a relay is SIGKILLed mid-delivery; the receiver has the effect once', async () => {
    const first = await relay({ LEASE: '2s' });
    receiver.answer = (d) => (receiver.of(d.id).length === 0 ? 'hold' : 'ok'); // the first delivery never gets its answer
    const held = receiver.next((d) => d.answer === 'hold');
    const id = await add();
    await held; // the receiver has the message and its effect happened; the relay has not marked it
    await kill(first);
    const second = await relay({ LEASE: '2s' });
    await until(async () => (await undelivered([id])) === 0);
    const deliveries = receiver.of(id);
    expect(deliveries.map((d) => d.pid)).toEqual([String(first.pid), String(second.pid)]);
    expect(deliveries.map((d) => d.attempt)).toEqual([1, 2]);
    expect(receiver.effects.get(id)).toBe(1);
  });

  it('several relays at once deliver every message at least once, and share the work', async () => {
    await Promise.all([relay(), relay(), relay(), relay()]);
    const ids: string[] = [];
    for (let i = 0; i < 150; i += 10) ids.push(...(await Promise.all(Array.from({ length: 10 }, () => add()))));
    await until(async () => (await undelivered(ids)) === 0);
    const received = new Set(receiver.deliveries.map((d) => d.id));
    expect(ids.filter((id) => !received.has(id))).toEqual([]);
    expect(receiver.effects.size).toBe(ids.length);
    expect(new Set(receiver.deliveries.map((d) => d.pid)).size).toBeGreaterThan(1);
    console.log(`outbox: ${ids.length} messages, ${receiver.deliveries.length} deliveries by ${new Set(receiver.deliveries.map((d) => d.pid)).size} relays`);
  });

  it('parks a message its receiver refuses past the horizon as a dead letter; a replay delivers it', async () => {
    await relay({ HORIZON: '2s' });
    receiver.answer = () => 'fail';
    const id = await add();
    const outbox = producer.app.get(Outbox);
    await until(async () => (await outbox.deadLetters()).some((d) => d.id === id));
    const refused = receiver.of(id).length;
    expect(refused).toBeGreaterThanOrEqual(1);
    receiver.answer = () => 'ok';
    expect(await outbox.replay([id])).toEqual([id]);
    await until(async () => (await undelivered([id])) === 0);
    expect(receiver.of(id).map((d) => d.answer)).toEqual([...Array<string>(refused).fill('fail'), 'ok']);
    expect(await outbox.deadLetters()).toEqual([]);
  });

  it('keeps each stream in order across relays and failed deliveries', async () => {
    await Promise.all([relay(), relay(), relay(), relay()]);
    // The first attempt of every second message fails: without ordering, its successor would overtake it.
    receiver.answer = (d) => (d.attempt === 1 && order.get(d.id)! % 2 === 1 ? 'fail' : 'ok');
    const order = new Map<string, number>();
    const streams = ['payment-a', 'payment-b', 'payment-c'];
    const ids: string[] = [];
    for (let i = 0; i < 4; i += 1) {
      for (const stream of streams) {
        const id = await add({ stream, payload: { i } });
        order.set(id, i);
        ids.push(id);
      }
    }
    await until(async () => (await undelivered(ids)) === 0, 90_000);
    for (const stream of streams) {
      const delivered = receiver.deliveries.filter((d) => d.stream === stream && d.answer === 'ok').map((d) => order.get(d.id));
      expect(delivered).toEqual([0, 1, 2, 3]);
    }
  }, 120_000);

  it('the control without an outbox: a send after the commit is lost when the process dies between them', async () => {
    const id = randomUUID();
    const naive = await startChild({ OUTBOX_MODE: 'naive', DATABASE_URL: db.url, RECEIVER_URL: receiver.url, ORDER_ID: id }, 'committed');
    await kill(naive);
    // Dead before it began the send (it says `sending` first): nothing can arrive later.
    expect(naive.output().split('\n')).not.toContain('sending');
    expect(await producer.dataSource.query('SELECT id FROM naive_orders WHERE id = $1', [id])).toEqual([{ id }]);
    expect(receiver.of(id)).toEqual([]); // committed, never announced
  });
});
