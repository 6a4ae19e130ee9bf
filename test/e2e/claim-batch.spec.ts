import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { IDEMPOTENCY_STORE, ClaimRequest, ClaimResult, IdempotencyStore } from '../../src/idempotency/idempotency.store';
import { fingerprint } from '../../src/idempotency/fingerprint';
import { keyId } from '../../src/idempotency/key-id';
import { CLAIM_SQL } from '../../src/idempotency/postgres-idempotency.store';
import { TestApp, createTestApp } from '../support/app';

/**
 * Claims asked for in one turn of the event loop go to PostgreSQL in one
 * statement (ClaimBatch), each answered as a claim of its own would be. A
 * statement is one transaction: rows it inserted share their `xmin`, which is
 * how these tests see what went together.
 */
describe('claims sent together (e2e, real PostgreSQL)', () => {
  jest.setTimeout(60_000);
  let t: TestApp;
  let store: IdempotencyStore;
  let db: DataSource;

  beforeAll(async () => {
    t = await createTestApp();
    store = t.app.get(IDEMPOTENCY_STORE);
    db = t.app.get(DataSource);
  });
  afterAll(() => t?.close());

  const scope = 'claim-batch';
  const fp = (body: string) => fingerprint('POST', '/claim-batch', { body });
  const claimOf = (key: string, body = 'a', leaseMs = 30_000): ClaimRequest => ({
    scope,
    key,
    fingerprint: fp(body),
    leaseMs,
    retentionMs: 60_000,
  });
  const transactionsOf = async (keys: string[]): Promise<number> => {
    const rows = await db.query<{ n: string }[]>(
      'SELECT count(DISTINCT xmin::text) AS n FROM idempotency_keys WHERE id = ANY($1::uuid[])',
      [keys.map((k) => keyId(scope, k))],
    );
    return Number(rows[0].n);
  };
  const kinds = (results: ClaimResult[]) => results.map((r) => r.kind).sort();

  it('claims 50 distinct keys asked for at once in one statement, each its own', async () => {
    const keys = Array.from({ length: 50 }, () => randomUUID());
    const results = await Promise.all(keys.map((k) => store.claim(claimOf(k))));
    expect(results.every((r) => r.kind === 'claimed')).toBe(true);
    const tokens = new Set(results.map((r) => (r.kind === 'claimed' ? r.owner.scope + r.owner.key : '')));
    expect(tokens.size).toBe(50);
    expect(await transactionsOf(keys)).toBe(1);
  });

  it('claims keys asked for in separate turns in separate statements', async () => {
    const keys = [randomUUID(), randomUUID()];
    await store.claim(claimOf(keys[0]));
    await store.claim(claimOf(keys[1]));
    expect(await transactionsOf(keys)).toBe(2);
  });

  it('gives one of ten identical claims in one batch the key, the others 409', async () => {
    const key = randomUUID();
    const results = await Promise.all(Array.from({ length: 10 }, () => store.claim(claimOf(key))));
    expect(kinds(results)).toEqual(['claimed', ...Array(9).fill('in_progress')]);
  });

  it('answers a claim with another body in the same batch as a later claim would: 422', async () => {
    const key = randomUUID();
    const results = await Promise.all([store.claim(claimOf(key, 'a')), store.claim(claimOf(key, 'b')), store.claim(claimOf(key, 'a'))]);
    expect(results.map((r) => r.kind)).toEqual(['claimed', 'mismatch', 'in_progress']);
  });

  it('answers each key of one batch from its own row: new, completed, in progress, other body', async () => {
    const [fresh, done, running, other] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    for (const key of [done, running, other]) {
      const first = await store.claim(claimOf(key));
      if (first.kind !== 'claimed') throw new Error(`setup: ${first.kind}`);
    }
    // `done` and `other` have a stored response, as a completion leaves it.
    for (const key of [done, other]) {
      await db.query('UPDATE idempotency_keys SET status = 201, body = $2 WHERE id = $1::uuid', [keyId(scope, key), `{"k":"${key}"}`]);
    }
    const results = await Promise.all([
      store.claim(claimOf(fresh)),
      store.claim(claimOf(done)),
      store.claim(claimOf(running)),
      store.claim(claimOf(other, 'b')),
    ]);
    expect(results.map((r) => r.kind)).toEqual(['claimed', 'completed', 'in_progress', 'mismatch']);
    const completed = results[1];
    expect(completed.kind === 'completed' && completed.response.body).toBe(`{"k":"${done}"}`);
  });

  it('takes over an expired lease within a batch, and its duplicate is told 409', async () => {
    const key = randomUUID();
    const first = await store.claim(claimOf(key, 'a', 1));
    expect(first.kind).toBe('claimed');
    await new Promise((r) => setTimeout(r, 20));
    const results = await Promise.all([store.claim(claimOf(key)), store.claim(claimOf(key))]);
    expect(results[0]).toMatchObject({ kind: 'claimed', takenOver: true });
    expect(results[1].kind).toBe('in_progress');
  });

  it('fails every claim of a batch whose statement failed, and claims again afterwards', async () => {
    const keys = [randomUUID(), randomUUID()];
    // A fingerprint PostgreSQL cannot take: the whole statement is refused.
    const bad = { ...claimOf(keys[1]), leaseMs: Number.NaN };
    const settled = await Promise.allSettled([store.claim(claimOf(keys[0])), store.claim(bad)]);
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected']);
    expect((await store.claim(claimOf(keys[0]))).kind).toBe('claimed');
  });

  it('reads each key by its primary key even in a plan made while the table was empty', async () => {
    // A generic plan (as a prepared statement gets after five runs) of the claim on an
    // empty copy of the table, then the table grows: the plan must still look keys up.
    const runner = db.createQueryRunner();
    await runner.connect();
    try {
      await runner.startTransaction();
      await runner.query('CREATE TEMP TABLE claim_plan (LIKE idempotency_keys INCLUDING ALL) ON COMMIT DROP');
      await runner.query('SET LOCAL plan_cache_mode = force_generic_plan');
      await runner.query(`PREPARE claim_plan_test(uuid[], bytea[], int8[], int8[]) AS ${CLAIM_SQL('claim_plan')}`);
      // The first execution plans it, on the empty table, and the plan is kept.
      await runner.query(`EXECUTE claim_plan_test('{}', '{}', '{}', '{}')`);
      await runner.query(
        `INSERT INTO claim_plan (id, lease, expires_at, fingerprint)
         SELECT gen_random_uuid(), 1, now(), '\\x00000000000000000000000000000000'::bytea FROM generate_series(1, 20000)`,
      );
      const plan = (await runner.query(`EXPLAIN EXECUTE claim_plan_test('{${randomUUID()}}', '{}', '{}', '{}')`)) as { 'QUERY PLAN': string }[];
      const text = plan.map((row) => row['QUERY PLAN']).join('\n');
      expect(text).toMatch(/Index Scan using \S+ on claim_plan/);
      expect(text).not.toMatch(/Seq Scan on claim_plan/);
    } finally {
      await runner.query('DEALLOCATE ALL').catch(() => undefined);
      if (runner.isTransactionActive) await runner.rollbackTransaction();
      await runner.release();
    }
  });
});
