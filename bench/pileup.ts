import { randomUUID } from 'node:crypto';
import { Client, Pool } from 'pg';
import { JSON_TYPE, StoreHarness } from './lib/app';
import { LockSampler } from './lib/lock-sampler';
import { median, msSince, round, sleep } from './lib/stats';

/**
 * §2 Duplicate pile-up: one request holds the key (claimed, not completed) for
 * `holdMs` (its handler's work), and 99 duplicates are fired at once on a pool
 * of connections (the same size for both variants).
 *
 *   ours       PostgresIdempotencyStore.claim on its claim pool. The owner's
 *              claim committed on its own; it completes after holdMs in its
 *              business transaction.
 *   reference  the classic claim inside the business transaction, implemented
 *              here: INSERT ... ON CONFLICT (key) DO UPDATE SET locked_at = now()
 *              WHERE in progress AND same fingerprint AND lease expired
 *              RETURNING, then a SELECT when no row came back. The owner holds
 *              its claim in an open transaction for holdMs, then stores its
 *              response and commits; duplicates queue on its row until then.
 *
 * Both duplicate pools get the same size and settings (synchronous_commit off,
 * as the store's claim pool), so the difference is the claim's design alone.
 */
const REFERENCE_DDL = `
CREATE TABLE IF NOT EXISTS reference_idempotency_keys (
  client_id uuid NOT NULL,
  key text NOT NULL,
  fingerprint bytea NOT NULL,
  locked_at timestamptz,
  status smallint,
  body text,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, key)
)`;

const REFERENCE_CLAIM = `
INSERT INTO reference_idempotency_keys AS k (client_id, key, fingerprint, locked_at)
VALUES ($1::uuid, $2::text, $3::bytea, now())
ON CONFLICT (client_id, key) DO UPDATE SET locked_at = now()
 WHERE k.status IS NULL AND k.fingerprint = EXCLUDED.fingerprint
   AND k.locked_at < now() - $4::int8 * interval '1 millisecond'
RETURNING (k.xmax = 0) AS inserted`;

const REFERENCE_GET = `
SELECT status, fingerprint = $3::bytea AS same FROM reference_idempotency_keys
 WHERE client_id = $1::uuid AND key = $2::text`;

const REFERENCE_COMPLETE = `
UPDATE reference_idempotency_keys SET status = $3, body = $4, locked_at = NULL
 WHERE client_id = $1::uuid AND key = $2::text`;

export type Answer = 'in_progress_409' | 'replay' | 'mismatch_422' | 'claimed';

export interface PileupRound {
  allAnsweredMs: number;
  /** Whether the lock sampler ran during this round. */
  sampled: boolean;
  answers: Partial<Record<Answer, number>>;
  maxLockWaiters: number;
  maxUngrantedLocks: number;
  lockSamples: number;
}

export interface PileupVariant {
  rounds: PileupRound[];
  medianAllAnsweredMs: number;
  maxAllAnsweredMs: number;
  /** Answers of the timed rounds. */
  answers: Partial<Record<Answer, number>>;
  /** The rounds with the lock sampler running, and what it saw. */
  sampledRounds: PileupRound[];
  medianAllAnsweredSampledMs: number;
  maxLockWaiters: number;
  maxUngrantedLocks: number;
  lockSamples: number;
}

export interface PileupResult {
  duplicates: number;
  holdMs: number;
  poolSize: number;
  rounds: number;
  sampledRounds: number;
  ours: PileupVariant;
  reference: PileupVariant;
  /** reference median / ours median: how many times faster all duplicates are answered. */
  speedup: number;
  /**
   * Ours, sampled, with the owner completing 2 ms into the burst: its completion
   * UPDATE holds the row until its COMMIT. The claim reads the row first and
   * attempts no INSERT when it exists, so duplicates should not wait on that
   * transaction; this row checks it.
   */
  oursOwnerCompletesMidBurst: {
    holdMs: number;
    rounds: PileupRound[];
    medianAllAnsweredMs: number;
    maxLockWaiters: number;
    maxUngrantedLocks: number;
    answers: Partial<Record<Answer, number>>;
  };
}

const MID_BURST_HOLD_MS = 2;

function tally(answers: Answer[]): Partial<Record<Answer, number>> {
  const t: Partial<Record<Answer, number>> = {};
  for (const a of answers) t[a] = (t[a] ?? 0) + 1;
  return t;
}

export async function pileup(
  h: StoreHarness,
  url: string,
  opts: { duplicates: number; holdMs: number; rounds: number; sampledRounds: number },
): Promise<PileupResult> {
  const poolSize = h.options.postgres.claimPoolSize;
  const sampler = await LockSampler.open(url);
  const refPool = new Pool({
    connectionString: url,
    max: poolSize,
    application_name: 'bench-reference-claims',
    options: '-c synchronous_commit=off',
  });
  const owner = new Client({ connectionString: url, application_name: 'bench-reference-owner' });
  await owner.connect();
  await owner.query(REFERENCE_DDL);
  await owner.query('TRUNCATE reference_idempotency_keys');
  const body = (id: string) => JSON.stringify({ id, amount: 1000, currency: 'usd' });
  const leaseMs = h.options.leaseMs;

  async function oursRound(sampled: boolean, holdMs = opts.holdMs): Promise<PileupRound> {
    const key = randomUUID();
    const first = await h.store.claim(h.request(key));
    if (first.kind !== 'claimed') throw new Error(`pile-up: the owner did not claim (${first.kind})`);
    const ownerDone = sleep(holdMs).then(() =>
      h.complete(first.owner, { status: 201, body: body(randomUUID()), contentType: JSON_TYPE }),
    );
    if (sampled) sampler.start();
    const started = process.hrtime.bigint();
    const answers = await Promise.all(
      Array.from({ length: opts.duplicates }, async (): Promise<Answer> => {
        const c = await h.store.claim(h.request(key));
        return c.kind === 'in_progress' ? 'in_progress_409' : c.kind === 'completed' ? 'replay' : c.kind === 'mismatch' ? 'mismatch_422' : 'claimed';
      }),
    );
    const allAnsweredMs = msSince(started);
    const locks = sampled ? await sampler.stop() : undefined;
    await ownerDone;
    return { allAnsweredMs: round(allAnsweredMs), answers: tally(answers), ...pick(locks) };
  }

  async function referenceRound(sampled: boolean): Promise<PileupRound> {
    const key = randomUUID();
    const request = h.request(key);
    const params = [request.scope, key, request.fingerprint, leaseMs];
    await owner.query('BEGIN');
    const { rows } = await owner.query<{ inserted: boolean }>(REFERENCE_CLAIM, params);
    if (!rows[0]?.inserted) throw new Error('pile-up: the reference owner did not claim');
    const ownerDone = sleep(opts.holdMs).then(async () => {
      await owner.query(REFERENCE_COMPLETE, [request.scope, key, 201, body(randomUUID())]);
      await owner.query('COMMIT');
    });
    if (sampled) sampler.start();
    const started = process.hrtime.bigint();
    const answers = await Promise.all(
      Array.from({ length: opts.duplicates }, async (): Promise<Answer> => {
        const claim = await refPool.query<{ inserted: boolean }>(REFERENCE_CLAIM, params);
        if (claim.rows[0]) return 'claimed';
        const { rows: got } = await refPool.query<{ status: number | null; same: boolean }>(REFERENCE_GET, params.slice(0, 3));
        const row = got[0];
        if (!row) return 'in_progress_409';
        if (!row.same) return 'mismatch_422';
        return row.status === null ? 'in_progress_409' : 'replay';
      }),
    );
    const allAnsweredMs = msSince(started);
    const locks = sampled ? await sampler.stop() : undefined;
    await ownerDone;
    return { allAnsweredMs: round(allAnsweredMs), answers: tally(answers), ...pick(locks) };
  }

  const ours: PileupRound[] = [];
  const reference: PileupRound[] = [];
  const oursSampled: PileupRound[] = [];
  const oursMidBurst: PileupRound[] = [];
  const referenceSampled: PileupRound[] = [];
  try {
    // One unreported warm-up round each (every pool connection opened), then
    // alternate. The timed rounds run without the lock sampler (on 2 cores its
    // busy polling would slow what it observes); the sampled rounds follow.
    await oursRound(false);
    await referenceRound(false);
    for (let i = 0; i < opts.rounds; i++) {
      ours.push(await oursRound(false));
      reference.push(await referenceRound(false));
    }
    for (let i = 0; i < opts.sampledRounds; i++) {
      oursSampled.push(await oursRound(true));
      referenceSampled.push(await referenceRound(true));
    }
    // Not a comparison: ours when the owner's completion lands inside the burst.
    for (let i = 0; i < opts.sampledRounds; i++) oursMidBurst.push(await oursRound(true, MID_BURST_HOLD_MS));
  } finally {
    await owner.query('ROLLBACK').catch(() => undefined);
    await owner.end();
    await refPool.end();
    await sampler.close();
  }
  const o = variant(ours, oursSampled);
  const r = variant(reference, referenceSampled);
  return {
    duplicates: opts.duplicates,
    holdMs: opts.holdMs,
    poolSize,
    rounds: opts.rounds,
    sampledRounds: opts.sampledRounds,
    ours: o,
    reference: r,
    speedup: round(r.medianAllAnsweredMs / o.medianAllAnsweredMs, 2),
    oursOwnerCompletesMidBurst: {
      holdMs: MID_BURST_HOLD_MS,
      rounds: oursMidBurst,
      medianAllAnsweredMs: round(median(oursMidBurst.map((x) => x.allAnsweredMs))),
      maxLockWaiters: Math.max(...oursMidBurst.map((x) => x.maxLockWaiters)),
      maxUngrantedLocks: Math.max(...oursMidBurst.map((x) => x.maxUngrantedLocks)),
      answers: tally(oursMidBurst.flatMap((x) => Object.entries(x.answers).flatMap(([k, n]) => Array<Answer>(n ?? 0).fill(k as Answer)))),
    },
  };
}

function pick(s?: { samples: number; maxLockWaiters: number; maxUngrantedLocks: number }) {
  return s
    ? { sampled: true, maxLockWaiters: s.maxLockWaiters, maxUngrantedLocks: s.maxUngrantedLocks, lockSamples: s.samples }
    : { sampled: false, maxLockWaiters: 0, maxUngrantedLocks: 0, lockSamples: 0 };
}

function variant(rounds: PileupRound[], sampled: PileupRound[]): PileupVariant {
  const answers: Partial<Record<Answer, number>> = {};
  for (const r of rounds) for (const [k, v] of Object.entries(r.answers)) answers[k as Answer] = (answers[k as Answer] ?? 0) + v;
  return {
    rounds,
    medianAllAnsweredMs: round(median(rounds.map((r) => r.allAnsweredMs))),
    maxAllAnsweredMs: round(Math.max(...rounds.map((r) => r.allAnsweredMs))),
    answers,
    sampledRounds: sampled,
    medianAllAnsweredSampledMs: round(median(sampled.map((r) => r.allAnsweredMs))),
    maxLockWaiters: Math.max(...sampled.map((r) => r.maxLockWaiters)),
    maxUngrantedLocks: Math.max(...sampled.map((r) => r.maxUngrantedLocks)),
    lockSamples: sampled.reduce((n, r) => n + r.lockSamples, 0),
  };
}
