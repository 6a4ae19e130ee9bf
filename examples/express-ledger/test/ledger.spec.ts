import { randomUUID } from 'node:crypto';
import { Body, Controller, INestApplication, Post, Req } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request, { Response } from 'supertest';
import { DataSource } from 'typeorm';
import { AppModule } from '../src/app.module';
import { CreditBody, LedgerController } from '../src/ledger.controller';
import { AuthenticatedRequest } from '../src/user.guard';

/**
 * The example on Express, with safe-retries installed from its packed tarball, on the
 * PostgreSQL database that DATABASE_URL names.
 */
const RACE = 100;
/** The statements that wait on a lock the backend `$1` holds. */
const HELD_BY = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND $1::int = ANY (pg_blocking_pids(pid))`;

/** The control: the same handler without @Idempotent(), so that the race test can fail. */
@Controller('unprotected-credits')
class UnprotectedLedgerController extends LedgerController {
  @Post()
  override credit(@Req() req: AuthenticatedRequest, @Body() body: CreditBody) {
    return super.credit(req, body);
  }
}

describe('express-ledger: safe-retries from its package, on Express', () => {
  let app: INestApplication;
  let db: DataSource;

  const post = (path: string, user: string, key: string): Promise<Response> =>
    request(app.getHttpServer()).post(path).set('X-User-Id', user).set('Idempotency-Key', key).send({ amount_cents: 1250 }).then();
  const rows = async (user: string) => Number((await db.query(`SELECT count(*)::int AS n FROM ledger_entries WHERE user_id = $1`, [user]))[0].n);

  /**
   * Holds every insert into ledger_entries at the door: a transaction of the test's own
   * takes LOCK TABLE … IN SHARE MODE, so a request that got its key waits inside its
   * handler, holding the key, until release(). `waiting()` counts the inserts held. Its
   * connections are the test's own, outside the app's pool, which the held requests fill.
   */
  async function holdInserts(): Promise<{ waiting(): Promise<number>; release(): Promise<void> }> {
    const own = await new DataSource({ type: 'postgres', url: process.env.DATABASE_URL }).initialize();
    const holder = own.createQueryRunner();
    await holder.startTransaction();
    await holder.query('LOCK TABLE ledger_entries IN SHARE MODE');
    const [{ pid }] = (await holder.query('SELECT pg_backend_pid() AS pid')) as { pid: number }[];
    return {
      waiting: async () => ((await own.query(HELD_BY, [pid])) as { n: number }[])[0].n,
      release: async () => {
        await holder.rollbackTransaction();
        await holder.release();
        await own.destroy();
      },
    };
  }

  /** Waits for a condition; only a hang is bounded, with its name. */
  async function until(what: string, condition: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (!(await condition())) {
      if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  beforeAll(async () => {
    if (!process.env.DATABASE_URL) throw new Error('set DATABASE_URL to a PostgreSQL database the tests may create tables in');
    const moduleRef = await Test.createTestingModule({ imports: [AppModule], controllers: [UnprotectedLedgerController] }).compile();
    app = moduleRef.createNestApplication({ logger: ['error', 'warn'] });
    await app.listen(0, '127.0.0.1'); // supertest then reuses the one listening server for concurrent requests
    db = app.get(DataSource);
  });
  afterAll(async () => {
    await app?.close();
  });

  it(`writes one row for ${RACE} identical requests at once: one 201, ${RACE - 1} 409s while it runs, then replays`, async () => {
    const user = `u_${randomUUID()}`;
    const key = randomUUID();
    const held = await holdInserts();
    let answered = 0;
    const sent = Array.from({ length: RACE }, () => post('/credits', user, key).finally(() => (answered += 1)));
    try {
      // Held until every request is answered or inside its handler (or two are inside: the key let both in).
      const settled = async () => {
        const inside = await held.waiting();
        return answered + inside === RACE || inside > 1;
      };
      await until(`each of the ${RACE} requests answered or inside its handler`, settled);
    } finally {
      await held.release();
    }
    const responses = await Promise.all(sent);

    const originals = responses.filter((r) => r.status === 201);
    const conflicts = responses.filter((r) => r.status === 409);
    expect({ original: originals.length, conflict: conflicts.length }).toEqual({ original: 1, conflict: RACE - 1 });
    const [original] = originals;
    expect(original.headers['idempotent-replayed']).toBeUndefined();
    expect(original.body).toMatchObject({ user_id: user, amount_cents: 1250 });
    for (const r of conflicts) {
      expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(r.body).toMatchObject({ status: 409, code: 'idempotency_request_in_progress' });
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
    }
    // The 99 retry, as Retry-After tells them: each gets the original response back.
    const retries = await Promise.all(conflicts.map(() => post('/credits', user, key)));
    for (const r of retries) {
      expect(r.status).toBe(201);
      expect(r.headers['idempotent-replayed']).toBe('true');
      expect(r.text).toBe(original.text);
    }
    expect(await rows(user)).toBe(1);
  });

  it(`the control: the same ${RACE} requests to the handler without @Idempotent() write ${RACE} rows`, async () => {
    const user = `u_${randomUUID()}`;
    const key = randomUUID();
    const responses = await Promise.all(Array.from({ length: RACE }, () => post('/unprotected-credits', user, key)));
    expect(responses.map((r) => r.status)).toEqual(Array(RACE).fill(201));
    expect(await rows(user)).toBe(RACE);
  });
});
