import { randomBytes, randomUUID } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { join, sep } from 'node:path';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test as NestTest } from '@nestjs/testing';
import request, { Test } from 'supertest';
import { DataSource } from 'typeorm';
import { AppModule } from '../src/app.module';
import { migrate } from '../src/data-source';
import { CREDIT_DELAY_MS } from '../src/ledger.service';

/**
 * The example app on Fastify, with safe-retries installed from its packed tarball, on
 * the PostgreSQL database that DATABASE_URL names. Every credit takes DELAY_MS after
 * its row is written, so that 50 requests sent at once overlap the first one.
 */
const DELAY_MS = 300;
const RACE = 50;

interface Timed {
  status: number;
  headers: Record<string, string | undefined>;
  text: string;
  started: number;
  ended: number;
}

async function timed(test: Test): Promise<Timed> {
  const started = performance.now();
  const res = await test;
  return { status: res.status, headers: res.headers as Record<string, string | undefined>, text: res.text, started, ended: performance.now() };
}

const newAccount = () => `acct_${randomBytes(4).toString('hex')}`;

describe('fastify-ledger: safe-retries from its package, on Fastify, with acct_… principals', () => {
  let app: NestFastifyApplication;
  let db: DataSource;

  const post = (path: string, account: string | null, key: string | null, body: object) => {
    let r = request(app.getHttpServer()).post(path).send(body);
    if (account !== null) r = r.set('X-Account-Id', account);
    return key === null ? r : r.set('Idempotency-Key', key);
  };
  const rows = async (account: string) =>
    Number((await db.query(`SELECT count(*)::int AS n FROM ledger_entries WHERE account_id = $1`, [account]))[0].n);
  /**
   * Stored keys are found by their id: the table keeps neither scope nor key in clear, its
   * id is the first 16 bytes of SHA-256(scope, NUL, key) as a uuid (docs: "Tables").
   */
  const keyRows = async (account: string, key: string) =>
    Number(
      (
        await db.query(
          `SELECT count(*)::int AS n FROM idempotency_keys
            WHERE id = encode(substring(sha256(convert_to($1, 'UTF8') || '\\x00'::bytea || convert_to($2, 'UTF8')) FROM 1 FOR 16), 'hex')::uuid`,
          [account, key],
        )
      )[0].n,
    );
  const allKeyRows = async () => Number((await db.query(`SELECT count(*)::int AS n FROM idempotency_keys`))[0].n);

  beforeAll(async () => {
    const url = process.env.DATABASE_URL;
    if (!url) throw new Error('set DATABASE_URL to a PostgreSQL database the tests may create tables in');
    await migrate(url); // the app's migrations, from src/data-source.ts; the module creates its tables at boot
    const moduleRef = await NestTest.createTestingModule({ imports: [AppModule] })
      .overrideProvider(CREDIT_DELAY_MS)
      .useValue(DELAY_MS)
      .compile();
    app = moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger: ['error', 'warn'] });
    await app.init();
    await app.getHttpAdapter().getInstance().ready();
    await app.listen(0, '127.0.0.1'); // supertest then reuses the one listening server for concurrent requests
    db = app.get(DataSource);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('uses safe-retries from its own node_modules, not the repository sources', () => {
    const resolved = realpathSync(require.resolve('safe-retries'));
    expect(resolved).toBe(realpathSync(join(__dirname, '..', 'node_modules', 'safe-retries', 'dist', 'index.js')));
    expect(resolved).not.toContain(`${sep}src${sep}idempotency${sep}`);
  });

  it(`writes one row for ${RACE} identical requests at once: one 201, the others replays or 409 with Retry-After`, async () => {
    const account = newAccount();
    const key = randomUUID();
    const body = { amount_cents: 1250, memo: 'top-up' };
    const responses = await Promise.all(Array.from({ length: RACE }, () => timed(post('/credits', account, key, body))));

    const originals = responses.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined);
    const replays = responses.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === 'true');
    const conflicts = responses.filter((r) => r.status === 409);
    // Measured: { original: 1, replay: 0, conflict: 49 }: the duplicates come while the first holds the key.
    const outcome = { original: originals.length, replay: replays.length, conflict: conflicts.length, other: RACE - originals.length - replays.length - conflicts.length };
    expect(outcome).toEqual({ original: 1, replay: expect.any(Number), conflict: expect.any(Number), other: 0 });
    const [original] = originals;
    expect(JSON.parse(original.text)).toMatchObject({ account_id: account, amount_cents: 1250, memo: 'top-up' });
    for (const r of replays) {
      expect(r.text).toBe(original.text);
      expect(r.headers['location']).toBe(original.headers['location']);
    }
    for (const r of conflicts) {
      expect(r.headers['content-type']).toBe('application/problem+json; charset=utf-8');
      expect(JSON.parse(r.text)).toMatchObject({ status: 409, code: 'idempotency_request_in_progress' });
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
    }
    // The race was real: duplicates arrived while the first request held its key.
    expect(conflicts.length).toBeGreaterThan(0);
    expect(responses.filter((r) => r.started < original.ended).length).toBe(RACE);
    // One effect.
    expect(await rows(account)).toBe(1);
    expect(await keyRows(account, key)).toBe(1);
  });

  it(`with @Idempotent({ wait: '5s' }), answers all ${RACE} with the one response: 1 original and ${RACE - 1} replays`, async () => {
    const account = newAccount();
    const key = randomUUID();
    const body = { amount_cents: 300, memo: 'patient' };
    const responses = await Promise.all(Array.from({ length: RACE }, () => timed(post('/credits/patient', account, key, body))));

    expect(responses.map((r) => r.status)).toEqual(Array(RACE).fill(201));
    const originals = responses.filter((r) => r.headers['idempotent-replayed'] === undefined);
    expect({ original: originals.length, replay: RACE - originals.length }).toEqual({ original: 1, replay: RACE - 1 });
    for (const r of responses) expect(r.text).toBe(originals[0].text);
    // They were in flight while the first request ran (DELAY_MS), and still got its replay.
    expect(responses.filter((r) => r.started < originals[0].ended - DELAY_MS / 2).length).toBe(RACE);
    expect(await rows(account)).toBe(1);
  });

  it(`the control: the same ${RACE} requests to the undecorated twin route write ${RACE} rows`, async () => {
    const account = newAccount();
    const key = randomUUID();
    const responses = await Promise.all(
      Array.from({ length: RACE }, () => timed(post('/credits/unprotected', account, key, { amount_cents: 1250, memo: 'top-up' }))),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(RACE).fill(201));
    expect(responses.filter((r) => r.headers['idempotent-replayed'] !== undefined)).toHaveLength(0);
    expect(await rows(account)).toBe(RACE);
  });

  it('replays byte for byte on Fastify: status, body, content type, Location', async () => {
    const account = newAccount();
    const key = randomUUID();
    const body = { amount_cents: 99, memo: 'coffee ☕ "quoted"' };
    const first = await post('/credits', account, key, body).expect(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const replay = await post('/credits', account, key, body).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(Buffer.from(replay.text)).toEqual(Buffer.from(first.text));
    expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    expect(replay.headers['content-length']).toBe(first.headers['content-length']);
    expect(replay.headers['location']).toBe(`/credits/${first.body.id}`);
    expect(await rows(account)).toBe(1);
  });

  it('answers 422 idempotency_key_reused for the same key with another body, and writes nothing', async () => {
    const account = newAccount();
    const key = randomUUID();
    await post('/credits', account, key, { amount_cents: 100, memo: 'one' }).expect(201);
    const res = await post('/credits', account, key, { amount_cents: 200, memo: 'two' }).expect(422);
    expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(res.body).toMatchObject({ status: 422, code: 'idempotency_key_reused' });
    expect(await rows(account)).toBe(1);
  });

  it('keeps keys per account: the same key from another account is a new credit', async () => {
    const [a, b] = [newAccount(), newAccount()];
    const key = randomUUID();
    const body = { amount_cents: 100, memo: 'same key' };
    await post('/credits', a, key, body).expect(201);
    const other = await post('/credits', b, key, body).expect(201);
    expect(other.headers['idempotent-replayed']).toBeUndefined();
    expect([await rows(a), await rows(b)]).toEqual([1, 1]);
    expect([await keyRows(a, key), await keyRows(b, key)]).toEqual([1, 1]);
  });

  it('refuses a request without a valid X-Account-Id (401) before the module claims anything', async () => {
    const key = randomUUID();
    const keys = await allKeyRows();
    await post('/credits', null, key, { amount_cents: 1, memo: 'x' }).expect(401);
    await post('/credits', '7c9e6679-7425-40de-944b-e07fc1f90ae7', key, { amount_cents: 1, memo: 'x' }).expect(401);
    expect(await allKeyRows()).toBe(keys);
  });
});
