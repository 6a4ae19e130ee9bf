import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { AddressInfo } from 'node:net';
import request from 'supertest';
import { RETRY_OFFSETS_S } from '../../src/events/webhook-schedule';
import { CLIENT_B, TestApp, createTestApp } from '../support/app';
import { createOrder } from '../support/fixtures';
import { waitFor } from '../support/http-client';

/**
 * Retries on a published schedule, and endpoints that fail paused, not
 * hammered; the outbox hands a message over at its next turn, not before.
 * The long waits are never slept: a test moves the database's view of time
 * instead (a message's attempts shifted into the past, an endpoint's probe
 * made due, the outbox's message made due and the relay woken).
 */
jest.setTimeout(120_000);

interface Answer {
  status: number;
  headers?: Record<string, string>;
}

/** One receiver, a path per endpoint: each answers as its test says; requests are counted per path; those of the path `hold` wait for release(). */
class Receiver {
  readonly requests = new Map<string, { webhookId: string; type: string }[]>();
  readonly answers = new Map<string, Answer>();
  private held: (() => void)[] = [];
  hold?: string;
  private server?: http.Server;

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const path = req.url ?? '/';
        const list = this.requests.get(path) ?? [];
        list.push({ webhookId: req.headers['webhook-id'] as string, type: (JSON.parse(body) as { type: string }).type });
        this.requests.set(path, list);
        const answer = this.answers.get(path) ?? { status: 204 };
        const reply = () => res.writeHead(answer.status, answer.headers).end();
        if (this.hold === path) this.held.push(reply);
        else reply();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return this;
  }

  url(path: string): string {
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}${path}`;
  }

  count(path: string): number {
    return this.requests.get(path)?.length ?? 0;
  }

  get waiting(): number {
    return this.held.length;
  }

  release(): void {
    this.hold = undefined;
    for (const reply of this.held.splice(0)) reply();
  }

  close(): Promise<void> {
    this.release();
    this.server?.closeAllConnections();
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

interface Endpoint {
  id: string;
  path: string;
}

describe('webhook retries and failing endpoints (e2e)', () => {
  let t: TestApp;
  let receiver: Receiver;
  const api = () => request(t.app.getHttpServer());
  const sql = <T>(text: string, params: unknown[] = []) => t.dataSource.query<T[]>(text, params);

  /** An endpoint of client A for order.created, at a path of its own answering `answer`. */
  async function endpoint(answer: Answer, eventTypes = ['order.created']): Promise<Endpoint> {
    const path = `/hooks/${randomUUID()}`;
    receiver.answers.set(path, answer);
    const created = await api().post('/webhook-endpoints').set(t.auth()).set('Idempotency-Key', randomUUID()).send({ url: receiver.url(path), event_types: eventTypes }).expect(201);
    return { id: created.body.id as string, path };
  }

  /** A new order.created event; answers its id. */
  async function orderEvent(): Promise<string> {
    const order = await createOrder(t);
    const [row] = await sql<{ id: string }>(`SELECT id FROM events WHERE type = 'order.created' AND data->>'id' = $1`, [order.id]);
    return row.id;
  }

  const attempts = (endpointId: string) =>
    sql<{ attempt: number; status: number | null; offset_s: number | null; over: boolean }>(
      // PostgreSQL before 17 cannot subtract from 'infinity': the last attempt's offset is then null, as none is left.
      `SELECT attempt, status, CASE WHEN retry_at <> 'infinity' THEN extract(epoch FROM retry_at - min(created_at) OVER ())::float8 END AS offset_s,
              retry_at = 'infinity' AS over
         FROM webhook_deliveries WHERE endpoint_id = $1 ORDER BY attempt`,
      [endpointId],
    );
  const finished = async (endpointId: string) => (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = $1 AND finished_at IS NOT NULL`, [endpointId]))[0].n;
  const state = async (endpointId: string) =>
    (await sql<{ failures: number; paused: boolean; probe_in_s: number | null }>(
      `SELECT failures, next_probe_at IS NOT NULL AS paused, extract(epoch FROM next_probe_at - now())::float8 AS probe_in_s FROM webhook_endpoints WHERE id = $1`,
      [endpointId],
    ))[0];
  const listed = async (endpointId: string) =>
    ((await api().get('/webhook-endpoints').set(t.auth()).expect(200)).body.data as { id: string; status: string; disabled_reason: string | null; failing_since: string | null }[]).find(
      (e) => e.id === endpointId,
    )!;
  const undelivered = async (endpointId: string) =>
    (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM idempotency_outbox WHERE payload->>'endpointId' = $1 AND delivered_at IS NULL`, [endpointId]))[0].n;

  /** The endpoint's undelivered messages due at once (their last error cleared), and the relay woken. */
  async function nudge(endpointId: string): Promise<void> {
    await sql(
      `UPDATE idempotency_outbox SET next_attempt_at = now(), last_error = NULL WHERE payload->>'endpointId' = $1 AND delivered_at IS NULL AND dead_at IS NULL`,
      [endpointId],
    );
    await sql(`SELECT pg_notify('idempotency_outbox', '')`);
  }

  /**
   * Every undelivered message of the endpoint handed over since the last nudge
   * and marked failed by the relay (held, or its attempt failed): none is in
   * the relay's hands, where its mark would undo the next nudge.
   */
  async function heldAgain(endpointId: string): Promise<void> {
    await waitFor('the relay to hand every message over and mark it failed', async () =>
      (
        await sql<{ n: number }>(`SELECT count(*)::int AS n FROM idempotency_outbox WHERE payload->>'endpointId' = $1 AND delivered_at IS NULL AND last_error IS NULL`, [
          endpointId,
        ])
      )[0].n === 0,
    );
  }

  /**
   * Time passes for the endpoint until its message's next attempt: the
   * attempts are moved into the past so that the latest retry_at is now, the
   * endpoint's pause ends, and the message is handed over.
   */
  async function advance(endpointId: string): Promise<void> {
    await heldAgain(endpointId);
    await sql(
      `UPDATE webhook_deliveries d SET created_at = d.created_at - s.shift, finished_at = d.finished_at - s.shift, retry_at = d.retry_at - s.shift
         FROM (SELECT max(retry_at) - now() AS shift FROM webhook_deliveries WHERE endpoint_id = $1 AND retry_at <> 'infinity') s
        WHERE d.endpoint_id = $1 AND s.shift > interval '0'`,
      [endpointId],
    );
    await sql(`UPDATE webhook_endpoints SET next_probe_at = now() WHERE id = $1 AND next_probe_at > now()`, [endpointId]);
    await nudge(endpointId);
  }

  beforeAll(async () => {
    receiver = await new Receiver().start();
    t = await createTestApp();
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
  });

  it('(a) retries on the published schedule: 12 attempts, the last 67 h 35 min 5 s after the first, then none', async () => {
    expect(RETRY_OFFSETS_S).toEqual([5, 305, 2105, 9305, 27305, 63305, 99305, 135305, 171305, 207305, 243305]);
    const e = await endpoint({ status: 500 });
    await orderEvent();
    for (let made = 1; made <= RETRY_OFFSETS_S.length + 1; made++) {
      await waitFor(`attempt ${made} to finish`, async () => (await finished(e.id)) === made);
      if (made <= RETRY_OFFSETS_S.length) await advance(e.id);
    }
    const all = await attempts(e.id);
    expect(all.map((a) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    // Each failed attempt holds its message's next time, counted from the first attempt; the last, none.
    expect(all.slice(0, -1).map((a) => a.offset_s)).toEqual(RETRY_OFFSETS_S);
    expect(all[11].over).toBe(true);
    // Its schedule over, the message is handed over again and held: no 13th request.
    await advance(e.id);
    await heldAgain(e.id);
    expect(receiver.count(e.path)).toBe(12);
    await api().delete(`/webhook-endpoints/${e.id}`).set(t.auth()).expect(204);
  });

  it('(b) honours Retry-After of a 429 or 503, in seconds or as a date, within the schedule', async () => {
    // 1 h: the first step at or after it (2 h 35 min 5 s), and the endpoint paused for that hour.
    const seconds = await endpoint({ status: 429, headers: { 'retry-after': '3600' } });
    // A date 10 days ahead: past the schedule's end, so its last step.
    const date = await endpoint({ status: 503, headers: { 'retry-after': new Date(Date.now() + 10 * 86_400_000).toUTCString() } });
    // 0: never sooner than the schedule's next step.
    const zero = await endpoint({ status: 429, headers: { 'retry-after': '0' } });
    // A Retry-After on a 500 means nothing.
    const other = await endpoint({ status: 500, headers: { 'retry-after': '3600' } });
    await orderEvent();
    for (const e of [seconds, date, zero, other]) await waitFor('the first attempt to finish', async () => (await finished(e.id)) === 1);
    expect((await attempts(seconds.id))[0].offset_s).toBe(9305);
    expect((await attempts(date.id))[0].offset_s).toBe(243305);
    expect((await attempts(zero.id))[0].offset_s).toBe(5);
    expect((await attempts(other.id))[0].offset_s).toBe(5);
    const paused = await state(seconds.id);
    expect(paused.paused).toBe(true);
    expect(paused.probe_in_s).toBeGreaterThan(3500);
    expect(paused.probe_in_s).toBeLessThanOrEqual(3600);
    expect((await state(date.id)).probe_in_s).toBeLessThanOrEqual(3600);
    expect((await state(other.id)).paused).toBe(false);

    // Handed over before its time, the message is held: nothing sent.
    await nudge(seconds.id);
    await heldAgain(seconds.id);
    expect(receiver.count(seconds.path)).toBe(1);
    // At its time it goes.
    receiver.answers.set(seconds.path, { status: 204 });
    await advance(seconds.id);
    await waitFor('the retry', async () => (await undelivered(seconds.id)) === 0);
    expect(receiver.count(seconds.path)).toBe(2);
    for (const e of [seconds, date, zero, other]) await api().delete(`/webhook-endpoints/${e.id}`).set(t.auth()).expect(204);
  });

  it('(c) a 410 Gone disables the endpoint at once, says why, and holds its messages', async () => {
    const gone = await endpoint({ status: 410 });
    const watcher = await endpoint({ status: 204 }, ['webhook_endpoint.disabled']);
    await orderEvent();
    await waitFor('the endpoint to be disabled', async () => (await listed(gone.id)).status === 'disabled');
    expect(await listed(gone.id)).toMatchObject({ status: 'disabled', disabled_reason: 'the endpoint answered 410 Gone' });
    const [event] = (await api().get('/events').set(t.auth()).expect(200)).body.data.filter(
      (ev: { type: string; data: { id: string } }) => ev.type === 'webhook_endpoint.disabled' && ev.data.id === gone.id,
    );
    expect(event.data).toMatchObject({ id: gone.id, status: 'disabled', disabled_reason: 'the endpoint answered 410 Gone' });
    expect(JSON.stringify(event.data)).not.toContain('whsec_');
    // The client's other endpoint is told.
    await waitFor('the watcher to get the event', () => receiver.requests.get(watcher.path)?.some((r) => r.webhookId === event.id));
    // Its message, due again, is held: no second request; new events are not queued for it.
    await advance(gone.id);
    await heldAgain(gone.id);
    await orderEvent();
    expect(receiver.count(gone.path)).toBe(1);
    expect(await undelivered(gone.id)).toBe(1);
    for (const id of [gone.id, watcher.id]) await api().delete(`/webhook-endpoints/${id}`).set(t.auth()).expect(204);
  });

  it('(d) after 5 failures in a row the endpoint is paused as a whole: one probe, then, once it succeeds, the rest', async () => {
    const e = await endpoint({ status: 500 });
    for (let i = 0; i < 5; i++) await orderEvent();
    await waitFor('the endpoint to pause', async () => (await state(e.id)).paused);
    expect((await state(e.id)).failures).toBeGreaterThanOrEqual(5);
    const sent = receiver.count(e.path);
    // New events while it is paused: handed over, held, no request and no attempt.
    for (let i = 0; i < 3; i++) await orderEvent();
    await waitFor(
      'the new messages to be held',
      async () => (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM idempotency_outbox WHERE payload->>'endpointId' = $1 AND last_error LIKE '%paused%'`, [e.id]))[0].n >= 3,
    );
    expect(receiver.count(e.path)).toBe(sent);

    // Its pause over and every message due, the relay hands all 8 over: one is the probe (held open by the receiver), 7 are held back.
    receiver.answers.set(e.path, { status: 204 });
    receiver.hold = e.path;
    await sql(`UPDATE webhook_deliveries SET retry_at = now() WHERE endpoint_id = $1 AND retry_at > now()`, [e.id]);
    await advance(e.id);
    await waitFor('the probe', () => receiver.waiting === 1);
    const unmarked = async () =>
      (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM idempotency_outbox WHERE payload->>'endpointId' = $1 AND delivered_at IS NULL AND last_error IS NULL`, [e.id]))[0].n;
    await waitFor('the 7 others to be held', async () => (await unmarked()) === 1);
    expect(receiver.count(e.path)).toBe(sent + 1);
    // The probe succeeds: the endpoint is healthy, and every message goes.
    receiver.release();
    await waitFor('the endpoint to recover', async () => !(await state(e.id)).paused);
    await nudge(e.id);
    await waitFor('every message delivered', async () => (await undelivered(e.id)) === 0);
    expect(await listed(e.id)).toMatchObject({ status: 'enabled', failing_since: null });
    expect(new Set(receiver.requests.get(e.path)!.slice(sent).map((r) => r.webhookId)).size).toBe(8);
    await api().delete(`/webhook-endpoints/${e.id}`).set(t.auth()).expect(204);
  });

  it('(e) failing for 5 days disables the endpoint at its next failed attempt, with an event; (f) enable resumes its messages', async () => {
    const e = await endpoint({ status: 503 });
    const eventId = await orderEvent();
    await waitFor('the first attempt', async () => (await finished(e.id)) === 1);
    expect((await listed(e.id)).failing_since).toEqual(expect.any(String));
    // Not yet 5 days: the next failure leaves it enabled.
    await sql(`UPDATE webhook_endpoints SET failing_since = now() - interval '4 days 23 hours' WHERE id = $1`, [e.id]);
    await advance(e.id);
    await waitFor('the second attempt', async () => (await finished(e.id)) === 2);
    expect((await listed(e.id)).status).toBe('enabled');
    await sql(`UPDATE webhook_endpoints SET failing_since = now() - interval '5 days' WHERE id = $1`, [e.id]);
    await advance(e.id);
    await waitFor('the endpoint to be disabled', async () => (await listed(e.id)).status === 'disabled');
    const disabled = await listed(e.id);
    expect(disabled.disabled_reason).toMatch(/^every delivery failed since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(5 days\)$/);
    const events = (await api().get('/events?limit=100').set(t.auth()).expect(200)).body.data as { type: string; data: { id: string; disabled_reason: string } }[];
    expect(events.filter((ev) => ev.type === 'webhook_endpoint.disabled' && ev.data.id === e.id).map((ev) => ev.data.disabled_reason)).toEqual([disabled.disabled_reason]);
    const made = await finished(e.id);
    await advance(e.id);
    await heldAgain(e.id);
    expect(await finished(e.id)).toBe(made);

    // (f) Enabled again: its held message goes at its turn.
    await api().post(`/webhook-endpoints/${e.id}/enable`).set(t.auth(CLIENT_B)).expect(404);
    expect((await api().post('/webhook-endpoints/not-an-id/enable').set(t.auth()).expect(404)).headers['content-type']).toMatch(/^application\/problem\+json/);
    receiver.answers.set(e.path, { status: 204 });
    const enabled = await api().post(`/webhook-endpoints/${e.id}/enable`).set(t.auth()).expect(200);
    expect(enabled.body).toMatchObject({ id: e.id, status: 'enabled', disabled_reason: null, failing_since: null });
    await advance(e.id);
    await waitFor('the held message delivered', async () => (await undelivered(e.id)) === 0);
    expect(receiver.requests.get(e.path)!.at(-1)).toMatchObject({ webhookId: eventId, type: 'order.created' });
    // And new events are queued for it again.
    await orderEvent();
    await waitFor('a new event delivered', async () => (await undelivered(e.id)) === 0 && receiver.count(e.path) === made + 2);
  });

  it('(g) the outbox hands a message over at its next turn, not before: its step, its Retry-After, its endpoint\'s pause end', async () => {
    /** The seconds from `at` (a time of the endpoint's, in SQL) to when the outbox next hands its message over, once the relay marked it. */
    const nextTakenAfter = async (endpointId: string, at: string) => {
      await heldAgain(endpointId);
      const [row] = await sql<{ s: number }>(
        `SELECT extract(epoch FROM o.next_attempt_at - (${at}))::float8 AS s
           FROM idempotency_outbox o, webhook_endpoints e
          WHERE o.payload->>'endpointId' = $1::text AND o.delivered_at IS NULL AND e.id = $1::uuid`,
        [endpointId],
      );
      return row.s;
    };
    const retryAt = `(SELECT max(retry_at) FROM webhook_deliveries WHERE endpoint_id = $1::uuid)`;
    // Each bound: at its time, and no later than the relay's mark after it (a few statements).
    const onTime = (s: number) => expect(s >= 0 && s < 5 ? 'on time' : `${s} s from its time`).toBe('on time');

    // A 500: next at the schedule's step (5 s after the first attempt); handed over before it, held, and next at it again.
    const failing = await endpoint({ status: 500 });
    await orderEvent();
    await waitFor('the first attempt', async () => (await finished(failing.id)) === 1);
    onTime(await nextTakenAfter(failing.id, retryAt));
    await nudge(failing.id);
    onTime(await nextTakenAfter(failing.id, retryAt));
    expect(receiver.count(failing.path)).toBe(1);

    // A 429 with Retry-After: 1 h: next at the first step after it (2 h 35 min 5 s), not at the relay's backoff.
    const limited = await endpoint({ status: 429, headers: { 'retry-after': '3600' } });
    await orderEvent();
    await waitFor('the first attempt', async () => (await finished(limited.id)) === 1);
    expect((await attempts(limited.id))[0].offset_s).toBe(9305);
    onTime(await nextTakenAfter(limited.id, retryAt));

    // Its step come while the endpoint is still paused (the Retry-After's hour): held, and next at the pause's end.
    await sql(`UPDATE webhook_deliveries SET retry_at = now() WHERE endpoint_id = $1`, [limited.id]);
    await nudge(limited.id);
    onTime(await nextTakenAfter(limited.id, 'e.next_probe_at'));
    expect(await nextTakenAfter(limited.id, 'now()')).toBeGreaterThan(3_000);
    expect(receiver.count(limited.path)).toBe(1);

    // And at its time it goes.
    receiver.answers.set(limited.path, { status: 204 });
    await advance(limited.id);
    await waitFor('the retry', async () => (await undelivered(limited.id)) === 0);
    expect(receiver.count(limited.path)).toBe(2);
    for (const e of [failing, limited]) await api().delete(`/webhook-endpoints/${e.id}`).set(t.auth()).expect(204);
  });
});
