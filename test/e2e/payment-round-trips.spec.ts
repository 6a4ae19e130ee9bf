import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { PgCountingProxy, PgCounts, startPgCountingProxy } from '../../packages/idempotency/test/support/pg-counting-proxy';
import { TestApp, createTestApp } from '../support/app';
import { TestDatabase, createTestDatabase } from '../support/database';
import { paymentBody } from '../support/fixtures';

/**
 * What one new payment costs the database, counted by the server's own answers
 * (the app reaches PostgreSQL through pg-counting-proxy.ts): the claim,
 * autocommitted; then Start, Intent and Finish, each a transaction of its
 * writes and its fenced recovery point or stored response. The app's clients
 * pipeline (data-source.ts): each phase's last fenced write goes with its
 * COMMIT, so the client waits once for both. `answers` is how many times a
 * client that waits for each answer would wait.
 */
jest.setTimeout(60_000);

describe('a payment, counted (e2e)', () => {
  let t: TestApp;
  let db: TestDatabase;
  let proxy: PgCountingProxy;

  beforeAll(async () => {
    db = await createTestDatabase();
    const server = new URL(db.url);
    proxy = await startPgCountingProxy({ host: server.hostname, port: Number(server.port) });
    t = await createTestApp({ env: { IDEMPOTENCY_JOBS: 'off' }, database: { ...db, url: proxy.url(db.url) } });
  });
  afterAll(async () => {
    await t?.close();
    await proxy?.close();
    await db?.drop();
  });

  /** The counts of one new payment: the fewest of five (the API keys' reading, every 4 s, may fall into one). */
  const onePayment = async (): Promise<PgCounts> => {
    const runs: PgCounts[] = [];
    for (let run = 0; run < 5; run++) {
      const before = proxy.counts();
      await request(t.app.getHttpServer()).post('/payments').set(t.auth()).set('Idempotency-Key', randomUUID()).send(paymentBody()).expect(201);
      const after = proxy.counts();
      runs.push({
        statements: after.statements - before.statements,
        commits: after.commits - before.commits,
        answers: after.answers - before.answers,
        roundTrips: after.roundTrips - before.roundTrips,
      });
    }
    return runs.reduce((a, b) => (b.answers < a.answers ? b : a));
  };

  it('a new payment: 14 statements, 4 commits, 11 round trips (14 one answer at a time)', async () => {
    expect(await onePayment()).toEqual({ statements: 14, commits: 4, answers: 14, roundTrips: 11 });
  });
});
