import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { AddressInfo } from 'node:net';
import { SchedulerRegistry } from '@nestjs/schedule';
import { Client } from 'pg';
import request from 'supertest';
import { EVENTS_PURGE_JOB_NAME, EVENTS_PURGE_LOCK_ID, EventsPurgeJob } from '../../src/events/retention/events-purge.job';
import { EventsPurgeRepository } from '../../src/events/retention/events-purge.repository';
import { WEBHOOK_DELIVERY_TOPIC } from '../../src/events/webhook-delivery.port';
import { TestApp, countRows, createTestApp } from '../support/app';
import { createOrder } from '../support/fixtures';
import { waitFor } from '../support/http-client';

/**
 * Events, delivery attempts and webhook dead letters are purged 30 days after
 * their outcome (an event's creation, an attempt's end, a dead letter's
 * death), on the database's clock: rows are aged there (UPDATE … - interval).
 * An event stays while an attempt of it is kept or a delivery of it waits or
 * is dead. Instances purging at once share the work without waiting for each
 * other: one holds the lock, the others skip; a row someone holds is skipped.
 */
jest.setTimeout(120_000);

const RETENTION_DAYS = 30;

describe('retention of events, delivery attempts and webhook dead letters (e2e)', () => {
  let t: TestApp;
  let receiver: http.Server;
  let endpointId: string;
  let clientId: string;
  const api = (app: TestApp = t) => request(app.app.getHttpServer());
  const purger = (app: TestApp = t) => app.app.get(EventsPurgeJob);
  const q = <T = unknown>(sql: string, params: unknown[] = []) => t.dataSource.query<T[]>(sql, params);
  const eventRows = (id: string) => countRows(t.dataSource, 'events', 'id = $1', [id]);
  const attemptRows = (eventId: string) => countRows(t.dataSource, 'webhook_deliveries', 'event_id = $1', [eventId]);
  const outboxRows = (eventId: string, where: string) => countRows(t.dataSource, 'idempotency_outbox', `payload->>'eventId' = $1 AND ${where}`, [eventId]);

  /** An order's event, delivered to the endpoint: one finished attempt, its message delivered. */
  const deliveredEvent = async (): Promise<string> => {
    const order = await createOrder(t);
    const [{ id }] = await q<{ id: string }>(`SELECT id FROM events WHERE data->>'id' = $1`, [order.id]);
    await waitFor(`event ${id} delivered`, async () => (await outboxRows(id, 'delivered_at IS NOT NULL')) === 1);
    // The attempt's record is finished just after its delivery is marked.
    await waitFor(`event ${id}'s attempt finished`, async () => (await countRows(t.dataSource, 'webhook_deliveries', 'event_id = $1 AND finished_at IS NOT NULL', [id])) === 1);
    return id;
  };
  const ageEvent = (id: string, days: number) => q(`UPDATE events SET created_at = now() - $2::int * interval '1 day' WHERE id = $1`, [id, days]);
  /** Its attempts as if made `days` ago (started a second before they finished). */
  const ageAttempts = (eventId: string, days: number) =>
    q(
      `UPDATE webhook_deliveries SET finished_at = now() - $2::int * interval '1 day',
              created_at = now() - $2::int * interval '1 day' - interval '1 second' WHERE event_id = $1`,
      [eventId, days],
    );
  /** A delivery of the event to the endpoint: waiting for its next attempt (a day away), or dead `deadDaysAgo`. */
  const addDelivery = (eventId: string, o: { deadDaysAgo?: number; topic?: string } = {}) =>
    q(
      `INSERT INTO idempotency_outbox (topic, payload, attempts, last_error, next_attempt_at, dead_at)
       VALUES ($1, $2::jsonb, 3, 'answered 503', now() + interval '1 day', now() - $3::int * interval '1 day')`,
      [o.topic ?? WEBHOOK_DELIVERY_TOPIC, JSON.stringify({ clientId, eventId, endpointId }), o.deadDaysAgo ?? null],
    );
  /** `n` events written straight to the table, past their retention. */
  const oldEvents = async (prefix: string, n: number) => {
    await q(
      `INSERT INTO events (client_id, id, type, data) SELECT $1, $2 || i, 'order.created', '{}' FROM generate_series(1, $3::int) AS i`,
      [clientId, prefix, n],
    );
    await q(`UPDATE events SET created_at = now() - $2::int * interval '1 day' WHERE id LIKE $1 || '%'`, [prefix, RETENTION_DAYS + 1]);
  };
  const eventsLike = (prefix: string) => countRows(t.dataSource, 'events', `id LIKE $1 || '%'`, [prefix]);
  /** Backends of this database waiting for a lock. */
  const lockWaits = async () => {
    const [{ n }] = await q<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.datname = current_database()`,
    );
    return n;
  };

  beforeAll(async () => {
    t = await createTestApp();
    receiver = http.createServer((req, res) => req.resume().on('end', () => res.writeHead(204).end()));
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
    endpointId = (await api().post('/webhook-endpoints').set(t.auth()).set('Idempotency-Key', randomUUID()).send({ url, event_types: ['*'] }).expect(201)).body.id;
    [{ id: clientId }] = await q<{ id: string }>(`SELECT client_id AS id FROM webhook_endpoints WHERE id = $1`, [endpointId]);
  });
  afterAll(async () => {
    await t.close();
    await new Promise((resolve) => receiver.close(resolve));
  });

  it('one run deletes what is past its retention and keeps the rest; an event with a delivery waiting stays until it is delivered', async () => {
    const old = await deliveredEvent();
    const oldWithRecentAttempt = await deliveredEvent();
    const fresh = await deliveredEvent();
    const waiting = await deliveredEvent();
    const oldDeadLetter = await deliveredEvent();
    const recentDeadLetter = await deliveredEvent();
    for (const id of [old, oldWithRecentAttempt, waiting, oldDeadLetter, recentDeadLetter]) await ageEvent(id, RETENTION_DAYS + 1);
    for (const id of [old, waiting, oldDeadLetter, recentDeadLetter]) await ageAttempts(id, RETENTION_DAYS + 1);
    // Redelivered yesterday: its attempt is kept, and so is the event.
    await ageAttempts(oldWithRecentAttempt, 1);
    // Attempts cut short (their process stopped): one started 31 days ago, one in flight now.
    const cutShort = `INSERT INTO webhook_deliveries (client_id, event_id, endpoint_id, message_id, attempt, created_at)
                      VALUES ($1, $2, $3, gen_random_uuid(), 2, now() - $4::int * interval '1 day')`;
    await q(cutShort, [clientId, old, endpointId, RETENTION_DAYS + 1]);
    await q(cutShort, [clientId, fresh, endpointId, 0]);
    await addDelivery(waiting);
    await addDelivery(oldDeadLetter, { deadDaysAgo: RETENTION_DAYS + 1 });
    await addDelivery(recentDeadLetter, { deadDaysAgo: 1 });
    // Another topic's dead letter is not a webhook's: the library keeps it.
    await addDelivery(old, { deadDaysAgo: RETENTION_DAYS + 1, topic: 'order.confirmation' });

    const result = await purger().purgeOnce();
    expect(result).toMatchObject({ skipped: false, events: 2, attempts: 5, deadLetters: 1 });
    const kept = async (ids: Record<string, string>) =>
      Object.fromEntries(await Promise.all(Object.entries(ids).map(async ([name, id]) => [name, { event: await eventRows(id), attempts: await attemptRows(id) }])));
    expect(await kept({ old, oldWithRecentAttempt, fresh, waiting, oldDeadLetter, recentDeadLetter })).toEqual({
      old: { event: 0, attempts: 0 },
      oldWithRecentAttempt: { event: 1, attempts: 1 },
      fresh: { event: 1, attempts: 2 },
      waiting: { event: 1, attempts: 0 },
      oldDeadLetter: { event: 0, attempts: 0 },
      recentDeadLetter: { event: 1, attempts: 0 },
    });
    expect({
      oldDeadLetter: await outboxRows(oldDeadLetter, 'dead_at IS NOT NULL'),
      recentDeadLetter: await outboxRows(recentDeadLetter, 'dead_at IS NOT NULL'),
      otherTopic: await outboxRows(old, `dead_at IS NOT NULL AND topic = 'order.confirmation'`),
      waiting: await outboxRows(waiting, 'delivered_at IS NULL AND dead_at IS NULL'),
    }).toEqual({ oldDeadLetter: 0, recentDeadLetter: 1, otherTopic: 1, waiting: 1 });
    await api().get(`/events/${old}`).set(t.auth()).expect(404);
    expect((await api().get(`/events/${waiting}/attempts`).set(t.auth()).expect(200)).body.data).toEqual([]);

    // Delivered, the waiting event goes at the next run.
    await q(`UPDATE idempotency_outbox SET delivered_at = now() WHERE payload->>'eventId' = $1 AND delivered_at IS NULL`, [waiting]);
    expect(await purger().purgeOnce()).toMatchObject({ skipped: false, events: 1, attempts: 0, deadLetters: 0 });
    expect(await eventRows(waiting)).toBe(0);
  });

  it('two instances purging at once delete each row once, and neither errs', async () => {
    const second = await createTestApp({ database: t.db });
    try {
      // More than a batch: the runs overlap for several statements.
      await oldEvents('evt_both_', 2_500);
      const runs = await Promise.all([purger().purgeOnce(), purger(second).purgeOnce()]);
      expect(runs.reduce((n, r) => n + r.events, 0)).toBe(2_500);
      expect(await eventsLike('evt_both_')).toBe(0);

      // The batches themselves, on two connections at once: SKIP LOCKED hands each row to one of them.
      await oldEvents('evt_batch_', 1_500);
      const retentionMs = RETENTION_DAYS * 24 * 60 * 60_000;
      const batches = await Promise.all([t, second].map((app) => app.app.get(EventsPurgeRepository).purgeBatch('events', 1_000, retentionMs)));
      expect(batches[0] + batches[1]).toBe(1_500);
      expect(await eventsLike('evt_batch_')).toBe(0);
    } finally {
      await second.close();
    }
  });

  it('skips at once while another instance holds the lock, and purges once it is free', async () => {
    await oldEvents('evt_locked_', 3);
    const other = new Client({ connectionString: t.db.url });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query('SELECT pg_advisory_xact_lock($1)', [EVENTS_PURGE_LOCK_ID]);
      expect(await purger().purgeOnce()).toMatchObject({ skipped: true, events: 0 });
      expect(await eventsLike('evt_locked_')).toBe(3);
      await other.query('COMMIT');
      expect(await purger().purgeOnce()).toMatchObject({ skipped: false, events: 3 });
    } finally {
      await other.end();
    }
  });

  it('never waits for a row another transaction holds: it leaves it for the next run', async () => {
    await oldEvents('evt_held_', 3);
    const holder = new Client({ connectionString: t.db.url });
    await holder.connect();
    try {
      // What an attempt's insert takes on its event (the foreign key), held open.
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM events WHERE id = 'evt_held_1' FOR KEY SHARE`);
      let ended = false;
      const run = purger().purgeOnce().finally(() => (ended = true));
      const outcome = await waitFor('the purge to end, or to wait for a lock', async () => (ended ? 'ended' : (await lockWaits()) > 0 ? 'waited' : undefined));
      if (outcome === 'waited') await holder.query('ROLLBACK');
      expect(outcome).toBe('ended');
      expect(await run).toMatchObject({ skipped: false, events: 2 });
      expect(await eventsLike('evt_held_')).toBe(1);
      await holder.query('ROLLBACK');
      expect(await purger().purgeOnce()).toMatchObject({ skipped: false, events: 1 });
    } finally {
      await holder.end();
    }
  });

  it('tells clients in the OpenAPI document how long events and attempts are kept', async () => {
    const doc = (await api().get('/docs-json').expect(200)).body as { paths: Record<string, { get: { description?: string } }> };
    for (const path of ['/events', '/events/{id}']) expect(doc.paths[path].get.description).toMatch(/^An event is kept 30 days from its creation/);
    expect(doc.paths['/events/{id}/attempts'].get.description).toMatch(/^Each attempt is kept 30 days from its end/);
  });

  it('runs on the keys purge schedule where the jobs run (IDEMPOTENCY_JOBS), and nowhere else', async () => {
    expect(t.app.get(SchedulerRegistry).doesExist('cron', EVENTS_PURGE_JOB_NAME)).toBe(false);
    // A retention of 2 s purges every second.
    const scheduled = await createTestApp({ database: t.db, env: { IDEMPOTENCY_JOBS: 'on', IDEMPOTENCY_RETENTION: '2s', IDEMPOTENCY_LEASE: '1s', CARD_NETWORK_TIMEOUT: '200ms' } });
    try {
      expect(scheduled.app.get(SchedulerRegistry).doesExist('cron', EVENTS_PURGE_JOB_NAME)).toBe(true);
      await oldEvents(`evt_scheduled_${randomUUID().slice(0, 8)}_`, 2);
      await waitFor('the scheduled purge', async () => (await eventsLike('evt_scheduled_')) === 0);
    } finally {
      await scheduled.close();
    }
  });
});
