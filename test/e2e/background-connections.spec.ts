import { randomUUID } from 'node:crypto';
import { IncomingMessage, Server, ServerResponse, createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { Client } from 'pg';
import request from 'supertest';
import { TestApp, countRows, createTestApp } from '../support/app';
import { paymentBody } from '../support/fixtures';
import { waitFor } from '../support/http-client';
import { lockTableWrites } from '../../packages/idempotency/test/support/table-lock';

/**
 * The outbox relay never holds the connections requests need. The app runs on
 * a main pool of 4 with 8 webhook endpoints, so every payment's event is a
 * batch of 8 deliveries that the relay works on at once. The test makes that
 * batch's statements wait at the database (a lock of its own), so each one
 * holds its connection for as long as the test says: only the relay's share
 * of the pool is held (one connection for the deliveries' starts, which
 * gather in one statement, within BackgroundConnections' turns; one of
 * RELAY_CONNECTIONS for the relay's own marks), and a payment sent meanwhile
 * is served from the rest. Released, every delivery is recorded and marked.
 */
jest.setTimeout(120_000);

const POOL_SIZE = 4;
const ENDPOINTS = 8;
/** The relay's share of the pool for its own marks (safe-retries' docs/outbox.md), and the outbox's table. */
const RELAY_CONNECTIONS = 2;
const OUTBOX_TABLE = 'idempotency_outbox';

/** Receives webhooks; `hold()` keeps every answer back until `release()`. */
class Receiver {
  received = 0;
  private held?: (() => void)[];
  private server?: Server;

  async start(): Promise<string> {
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      req.on('end', () => {
        this.received++;
        const answer = () => res.writeHead(204).end();
        if (this.held) this.held.push(answer);
        else answer();
      });
    });
    await new Promise<void>((done) => this.server!.listen(0, '127.0.0.1', done));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks`;
  }

  hold(): void {
    this.held = [];
  }

  release(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const answer of held) answer();
  }

  close(): Promise<void> {
    this.release();
    return new Promise((done) => (this.server ? this.server.close(() => done()) : done()));
  }
}

describe('background work holds only its share of the pool (e2e)', () => {
  let t: TestApp;
  let pg: Client;
  const receiver = new Receiver();

  beforeAll(async () => {
    const hooks = await receiver.start();
    t = await createTestApp({ env: { DATABASE_POOL_SIZE: String(POOL_SIZE) } });
    pg = new Client({ connectionString: t.db.url });
    await pg.connect();
    for (let i = 0; i < ENDPOINTS; i++) {
      await request(t.app.getHttpServer()).post('/webhook-endpoints').set(t.auth()).set('Idempotency-Key', randomUUID()).send({ url: hooks, event_types: ['payment.succeeded'] }).expect(201);
    }
  });
  afterAll(async () => {
    await pg?.end().catch(() => undefined);
    await t?.close();
    await receiver.close();
  });

  const pay = () => request(t.app.getHttpServer()).post('/payments').set(t.auth()).set('Idempotency-Key', randomUUID()).send(paymentBody());

  /** Sessions of this database waiting on a lock in a statement that matches `pattern`. */
  const waitingOnLock = async (pattern: string) =>
    (
      await pg.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE $1`,
        [pattern],
      )
    ).rows[0].n;

  const undelivered = () => countRows(t.dataSource, OUTBOX_TABLE, 'delivered_at IS NULL');

  it(`a batch of ${ENDPOINTS} deliveries whose records wait at the database holds one connection, their starts one statement; a payment meanwhile is 201`, async () => {
    // The statements that write the records (the one that starts an attempt is longer than the text pg_stat_activity keeps: its table, then).
    const records = '%webhook_deliveries%';
    const before = await countRows(t.dataSource, 'webhook_deliveries');
    const sent = receiver.received;
    const lock = await lockTableWrites(t.db.url, 'webhook_deliveries');
    try {
      await pay().expect(201);
      await waitFor('the records to wait for the lock', async () => (await waitingOnLock(records)) >= 1);
      // Served from the rest of the pool while the batch waits.
      const meanwhile = await pay();
      expect({ status: meanwhile.status, body: meanwhile.body }).toMatchObject({ status: 201 });
      // The starts of the first payment's deliveries wait as one statement; the second's gather behind it.
      expect(await waitingOnLock(records)).toBe(1);
    } finally {
      await lock.release();
    }
    await waitFor('every delivery to be recorded and marked', async () => (await undelivered()) === 0 || undefined, { seen: undelivered });
    expect(receiver.received).toBe(sent + 2 * ENDPOINTS);
    expect(await countRows(t.dataSource, 'webhook_deliveries')).toBe(before + 2 * ENDPOINTS);
  });

  it(`a batch of ${ENDPOINTS} marks that wait at the database holds one of the relay's ${RELAY_CONNECTIONS} connections; a payment meanwhile is 201`, async () => {
    const marks = '%SET delivered_at = now()%';
    const sent = receiver.received;
    receiver.hold();
    const lock = new Client({ connectionString: t.db.url });
    await lock.connect();
    try {
      await pay().expect(201);
      await waitFor(`the ${ENDPOINTS} webhooks to be sent`, () => receiver.received >= sent + ENDPOINTS);
      // Claimed and sent, not yet marked: the test locks them, then lets the answers go.
      await lock.query('BEGIN');
      const { rowCount } = await lock.query(`SELECT id FROM ${OUTBOX_TABLE} WHERE delivered_at IS NULL FOR UPDATE`);
      expect(rowCount).toBe(ENDPOINTS);
      receiver.release();
      // One mark statement at a time: the first delivery's waits, the others' wait to be marked together by the next.
      await waitFor('the mark to wait for the lock', async () => (await waitingOnLock(marks)) >= 1);
      const meanwhile = await pay();
      expect({ status: meanwhile.status, body: meanwhile.body }).toMatchObject({ status: 201 });
      expect(await waitingOnLock(marks)).toBe(1);
    } finally {
      receiver.release();
      await lock.query('ROLLBACK').catch(() => undefined);
      await lock.end();
    }
    await waitFor('every delivery to be marked', async () => (await undelivered()) === 0 || undefined, { seen: undelivered });
  });
});
