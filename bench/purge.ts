import { randomUUID } from 'node:crypto';
import { IdempotencyPurgeService } from 'safe-retries';
import { keyIdSql } from '../packages/idempotency/src/contract/key-id';
import { StoreHarness } from './lib/app';
import { Percentiles, msSince, round, summarize } from './lib/stats';

/**
 * §5 Purge: `keys` expired, completed keys inserted directly (expires_at in the
 * past), then purged by IdempotencyPurgeService.purgeOnce() (its default batch
 * and budget) while new keys are claimed one at a time; claim latency during the
 * purge against the same claims on the same table without it.
 * Several rounds, so that the purge-time claims number more than a few hundred.
 */
export interface PurgeRound {
  implementation: string;
  deleted: number;
  batches: number;
  durationMs: number;
  keysPerSecond: number;
  expiredLeft: number;
}

export interface PurgeBenchResult {
  expiredKeys: number;
  rounds: PurgeRound[];
  implementation: string;
  batchSize: number;
  /** Median over the rounds. */
  keysPerSecond: number;
  deleted: number;
  batches: number;
  durationMs: number;
  expiredLeft: number;
  /** Claims of every round, merged. */
  claimWithoutPurge: Percentiles;
  claimDuringPurge: Percentiles;
  /** claim p99 during the purge / without it. */
  p99Ratio: number;
}

/**
 * `rounds` times: insert `keys` expired keys, VACUUM, claim one at a time for
 * `baselineMs` (the baseline), then purge while claiming one at a time.
 */
export async function purgeBench(h: StoreHarness, keys: number, baselineMs: number, rounds: number): Promise<PurgeBenchResult> {
  const baseline: number[] = [];
  const during: number[] = [];
  const results: PurgeRound[] = [];
  for (let i = 0; i < rounds; i++) results.push(await purgeRound(h, keys, baselineMs, baseline, during));
  const claimWithoutPurge = summarize(baseline);
  const claimDuringPurge = summarize(during);
  const mid = [...results].sort((a, b) => a.keysPerSecond - b.keysPerSecond)[Math.floor((results.length - 1) / 2)];
  const implementations = [...new Set(results.map((r) => r.implementation))];
  return {
    expiredKeys: keys,
    rounds: results,
    implementation: implementations.join('; '),
    batchSize: h.options.purge.batchSize,
    keysPerSecond: mid.keysPerSecond,
    deleted: mid.deleted,
    batches: mid.batches,
    durationMs: mid.durationMs,
    expiredLeft: Math.max(...results.map((r) => r.expiredLeft)),
    claimWithoutPurge,
    claimDuringPurge,
    p99Ratio: round(claimDuringPurge.p99 / claimWithoutPurge.p99, 2),
  };
}

async function purgeRound(h: StoreHarness, keys: number, baselineMs: number, baseline: number[], during: number[]): Promise<PurgeRound> {
  const ds = h.dataSource;
  await ds.query('TRUNCATE idempotency_keys');
  await ds.query(
    `INSERT INTO idempotency_keys (id, fingerprint, lease, expires_at, status, body, headers)
     SELECT ${keyIdSql('$1::text', 'gen_random_uuid()::text')}, substring(sha256(i::text::bytea) FROM 1 FOR 16),
            0, now() - interval '1 hour' - i * interval '1 millisecond', 201,
            '{"id":"' || gen_random_uuid() || '","amount":' || (100 + i % 99900) || ',"currency":"usd"}', NULL
       FROM generate_series(1, $2::int) AS i`,
    [h.clientId, keys],
  );
  await ds.query('VACUUM (ANALYZE) idempotency_keys');

  const claimOnce = async (samples: number[]) => {
    const t = process.hrtime.bigint();
    const c = await h.store.claim(h.request(randomUUID()));
    samples.push(msSince(t));
    if (c.kind !== 'claimed') throw new Error(`purge: expected a claim, got ${c.kind}`);
  };

  // Warm-up, then the baseline: one claim at a time, no purge.
  for (let i = 0; i < 100; i++) await claimOnce([]);
  const baseStart = process.hrtime.bigint();
  while (msSince(baseStart) < baselineMs) await claimOnce(baseline);

  const implementation = 'IdempotencyPurgeService.purgeOnce()';
  let deleted = 0;
  let batches = 0;
  let done = false;
  const started = process.hrtime.bigint();
  const purging = (async () => {
    try {
      const service = h.context.get(IdempotencyPurgeService, { strict: false });
      for (;;) {
        const r = await service.purgeOnce();
        if (r.skipped) throw new Error('purgeOnce skipped (lock held)');
        deleted += r.deleted;
        batches += r.batches;
        if (r.deleted === 0 || deleted >= keys) break;
      }
    } finally {
      done = true;
    }
  })();
  while (!done) await claimOnce(during);
  await purging;
  const durationMs = msSince(started);
  const [{ left }] = await ds.query<{ left: string }[]>(`SELECT count(*) AS left FROM idempotency_keys WHERE expires_at <= now()`);
  return {
    implementation,
    deleted,
    batches,
    durationMs: round(durationMs, 1),
    keysPerSecond: Math.round(deleted / (durationMs / 1000)),
    expiredLeft: Number(left),
  };
}
