import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { AddressInfo } from 'node:net';
import { Client } from 'pg';
import request from 'supertest';
import { CLIENT_B, TestApp, countRows, createTestApp } from '../support/app';
import { createTestDatabase } from '../support/database';
import { createOrder } from '../support/fixtures';
import { waitFor } from '../support/http-client';

/**
 * Every delivery attempt is recorded, whatever the receiver answers, and the
 * client reads them: a 2xx whose body holds bytes a text column refuses is
 * delivered once; an attempt is written before its request is sent, so one
 * cut short keeps its row; a 2xx's record is written after the relay's slot
 * frees, and shutdown waits for it; GET /events/{id}/attempts lists them,
 * never with a secret, only to the event's client.
 */
jest.setTimeout(60_000);

/** A receiver whose answer each test sets: status, body bytes, or holding the request until released. */
class Receiver {
  requests = 0;
  /** The body of each request, in arrival order. */
  readonly bodies: string[] = [];
  /** Connections accepted. */
  connections = 0;
  answer: { status: number; body: Buffer } = { status: 204, body: Buffer.alloc(0) };
  private held: (() => void)[] = [];
  hold = false;
  private server?: http.Server;

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        this.requests++;
        this.bodies.push(Buffer.concat(chunks).toString('utf8'));
        const reply = () => res.writeHead(this.answer.status, { 'content-type': 'application/octet-stream' }).end(this.answer.body);
        if (this.hold) this.held.push(reply);
        else reply();
      });
    });
    this.server.on('connection', () => this.connections++);
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return this;
  }

  url(): string {
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}/hooks`;
  }

  get waiting(): number {
    return this.held.length;
  }

  release(): void {
    this.hold = false;
    for (const reply of this.held.splice(0)) reply();
  }

  close(): Promise<void> {
    this.release();
    this.server?.closeAllConnections();
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

interface Attempt {
  endpoint_id: string;
  attempt: number;
  status: number | null;
  error_class: string | null;
  response_excerpt: string | null;
  started_at: string;
  finished_at: string | null;
  duration_ms: number | null;
}

describe('webhook delivery attempts (e2e)', () => {
  let t: TestApp;
  let receiver: Receiver;
  let endpoint: { id: string; secret: string };
  const http = () => request(t.app.getHttpServer());
  const attempts = async (eventId: string, client?: { key: string }) =>
    (await http().get(`/events/${eventId}/attempts`).set(t.auth(client)).expect(200)).body as { object: 'list'; data: Attempt[] };
  /** A new order's event, in `app` (the suite's unless given). */
  const orderEvent = async (app = t) => {
    const order = await createOrder(app);
    const events = (await request(app.app.getHttpServer()).get('/events').set(app.auth()).expect(200)).body as { data: { id: string; data: { id: string } }[] };
    return events.data.find((e) => e.data.id === order.id)!.id;
  };
  const delivered = (eventId: string, app = t) =>
    countRows(app.dataSource, 'idempotency_outbox', `delivered_at IS NOT NULL AND payload->>'eventId' = $1`, [eventId]);
  /** The delivery marked and its attempt's record finished (written just after the mark's slot frees). */
  const recorded = (eventId: string) =>
    waitFor('the delivery to be marked and its attempt finished', async () =>
      (await delivered(eventId)) === 1 && (await countRows(t.dataSource, 'webhook_deliveries', 'event_id = $1 AND finished_at IS NOT NULL', [eventId])) === 1,
    );

  beforeAll(async () => {
    receiver = await new Receiver().start();
    t = await createTestApp();
    endpoint = (await http().post('/webhook-endpoints').set(t.auth()).set('Idempotency-Key', randomUUID()).send({ url: receiver.url(), event_types: ['order.created'] }).expect(201)).body;
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
  });

  it('a 2xx whose body holds a NUL byte is delivered once, its attempt recorded', async () => {
    receiver.answer = { status: 200, body: Buffer.from('ok\u0000thanks\u00ff\u0000', 'latin1') };
    const before = receiver.requests;
    const eventId = await orderEvent();
    await recorded(eventId);
    expect(receiver.requests - before).toBe(1);
    const { data } = await attempts(eventId);
    expect(data).toEqual([
      expect.objectContaining({ endpoint_id: endpoint.id, attempt: 1, status: 200, error_class: null, finished_at: expect.any(String) }),
    ]);
    expect(data[0].response_excerpt).toBe('ok\uFFFDthanks\uFFFD\uFFFD');
    expect(data[0].duration_ms).toBeGreaterThanOrEqual(0);
  });

  it('the message carries its event: the body sent is the event as GET /events/{id} answers it, byte for byte', async () => {
    receiver.answer = { status: 204, body: Buffer.alloc(0) };
    const eventId = await orderEvent();
    await waitFor('the delivery to be marked', async () => (await delivered(eventId)) === 1);
    const shown = (await http().get(`/events/${eventId}`).set(t.auth()).expect(200)).body as object;
    const [{ event }] = await t.dataSource.query<{ event: object }[]>(`SELECT payload->'event' AS event FROM idempotency_outbox WHERE payload->>'eventId' = $1`, [eventId]);
    expect(event).toEqual(shown);
    expect(receiver.bodies.filter((b) => b.includes(eventId))).toEqual([JSON.stringify(shown)]);
  });

  it('deliveries one after another to one endpoint go over one kept-alive connection', async () => {
    receiver.answer = { status: 204, body: Buffer.alloc(0) };
    const [requests, connections] = [receiver.requests, receiver.connections];
    for (let i = 0; i < 3; i++) {
      const eventId = await orderEvent();
      await waitFor('the delivery to be marked', async () => (await delivered(eventId)) === 1);
    }
    expect(receiver.requests - requests).toBe(3);
    // One at most: the connection of an earlier test may still be open.
    expect(receiver.connections - connections).toBeLessThanOrEqual(1);
  });

  it('an attempt is written before it is sent: cut short, it keeps its row, unfinished', async () => {
    receiver.answer = { status: 204, body: Buffer.alloc(0) };
    receiver.hold = true;
    const eventId = await orderEvent();
    await waitFor('the receiver to hold the request', () => receiver.waiting === 1);
    // What a process killed now leaves behind: the attempt, started and not finished.
    expect((await attempts(eventId)).data).toEqual([expect.objectContaining({ attempt: 1, status: null, error_class: null, finished_at: null, duration_ms: null })]);
    receiver.release();
    await recorded(eventId);
    expect((await attempts(eventId)).data).toEqual([expect.objectContaining({ attempt: 1, status: 204, finished_at: expect.any(String) })]);
  });

  it('failed attempts say why in a word, newest first, and never show the secret; only to the event\'s client', async () => {
    receiver.answer = { status: 503, body: Buffer.from(`busy ${randomUUID()}`) };
    const eventId = await orderEvent();
    await waitFor('two failed attempts', async () => (await attempts(eventId)).data.filter((a) => a.finished_at).length >= 2, { timeoutMs: 30_000 });
    receiver.answer = { status: 204, body: Buffer.alloc(0) };
    const { data } = await attempts(eventId);
    const finished = data.filter((a) => a.finished_at);
    expect(finished.slice(0, 2)).toEqual([
      expect.objectContaining({ attempt: 2, status: 503, error_class: 'http_status' }),
      expect.objectContaining({ attempt: 1, status: 503, error_class: 'http_status' }),
    ]);
    expect(JSON.stringify(data)).not.toContain(endpoint.secret.slice('whsec_'.length));
    await http().get(`/events/${eventId}/attempts`).set(t.auth(CLIENT_B)).expect(404);
    await http().get('/events/evt_00000000000000000000000000000000/attempts').set(t.auth()).expect(404);
  });

  it("a 2xx frees the relay's slot before its record is written, and shutdown waits for the records", async () => {
    receiver.answer = { status: 204, body: Buffer.alloc(0) };
    const db = await createTestDatabase();
    const own = await createTestApp({ database: db });
    const lock = new Client({ connectionString: db.url });
    await lock.connect();
    try {
      await request(own.app.getHttpServer())
        .post('/webhook-endpoints')
        .set(own.auth())
        .set('Idempotency-Key', randomUUID())
        .send({ url: receiver.url(), event_types: ['order.created'] })
        .expect(201);
      receiver.hold = true;
      const first = await orderEvent(own);
      await waitFor('the receiver to hold the request', () => receiver.waiting === 1);
      // The first attempt's row locked: its record waits for the lock, and the next record waits for it.
      await lock.query('BEGIN');
      await lock.query('SELECT 1 FROM webhook_deliveries WHERE event_id = $1 FOR UPDATE', [first]);
      receiver.release();
      await waitFor('the first delivery to be marked', async () => (await delivered(first, own)) === 1);
      const second = await orderEvent(own);
      await waitFor('the second delivery to be marked', async () => (await delivered(second, own)) === 1);
      const closed = own.close();
      await new Promise((resolve) => setTimeout(resolve, 200));
      await lock.query('COMMIT');
      await closed;
      const { rows } = await lock.query<{ finished: number }>(
        'SELECT count(*)::int AS finished FROM webhook_deliveries WHERE event_id = ANY($1) AND status = 204 AND finished_at IS NOT NULL',
        [[first, second]],
      );
      expect(rows[0].finished).toBe(2);
    } finally {
      receiver.release();
      await lock.end();
      await own.close().catch(() => undefined);
      await db.drop();
    }
  });
});
