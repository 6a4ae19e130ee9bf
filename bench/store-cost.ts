import { randomUUID } from 'node:crypto';
import { JSON_TYPE, PAYMENT_BODY, StoreHarness } from './lib/app';
import { SqlCounter } from './lib/sql-counter';
import { Percentiles, msSince, summarize } from './lib/stats';

/**
 * §1 Store cost, one request at a time, through the real PostgresIdempotencyStore:
 *   new key   claim + fenced completion in its own transaction
 *   replay    claim of a completed key, same body
 *   conflict  claim of a key in progress (lease valid)
 *   mismatch  claim of a completed key with another body
 * Latency per operation and the SQL statements each sends (pg Client.query hook).
 */
export interface PathCost {
  path: string;
  expect: string;
  latencyMs: Percentiles;
  statements: number;
  statementKinds: Record<string, number>;
}

export async function storeCost(h: StoreHarness, counter: SqlCounter, iterations: number): Promise<PathCost[]> {
  const response = (id: string) => ({ status: 201, body: JSON.stringify({ id, amount: 1000, currency: 'usd' }), contentType: JSON_TYPE });

  const completedKey = randomUUID();
  const first = await h.store.claim(h.request(completedKey));
  if (first.kind !== 'claimed') throw new Error(`setup: expected a claim, got ${first.kind}`);
  await h.complete(first.owner, response(randomUUID()));

  const inProgressKey = randomUUID();
  const held = await h.store.claim(h.request(inProgressKey));
  if (held.kind !== 'claimed') throw new Error(`setup: expected a claim, got ${held.kind}`);

  const otherBody = { ...PAYMENT_BODY, amount: 2000 };
  const paths: { path: string; expect: string; run: () => Promise<string> }[] = [
    {
      path: 'new key (claim + fenced completion in a transaction)',
      expect: 'claimed',
      run: async () => {
        const claim = await h.store.claim(h.request(randomUUID()));
        if (claim.kind === 'claimed') await h.complete(claim.owner, response(randomUUID()));
        return claim.kind;
      },
    },
    { path: 'replay (completed, same body)', expect: 'completed', run: async () => (await h.store.claim(h.request(completedKey))).kind },
    { path: 'in-progress conflict', expect: 'in_progress', run: async () => (await h.store.claim(h.request(inProgressKey))).kind },
    { path: 'mismatch (completed, other body)', expect: 'mismatch', run: async () => (await h.store.claim(h.request(completedKey, otherBody))).kind },
  ];

  const results: PathCost[] = [];
  for (const p of paths) {
    // Warm-up: connections open, plans cached.
    for (let i = 0; i < Math.min(200, iterations); i++) await p.run();
    // Statements of one operation (a few, to be sure the count is stable).
    const counted = await counter.measure(async () => {
      for (let i = 0; i < 10; i++) {
        const kind = await p.run();
        if (kind !== p.expect) throw new Error(`${p.path}: expected ${p.expect}, got ${kind}`);
      }
    });
    const samples: number[] = [];
    for (let i = 0; i < iterations; i++) {
      const t = process.hrtime.bigint();
      const kind = await p.run();
      samples.push(msSince(t));
      if (kind !== p.expect) throw new Error(`${p.path}: expected ${p.expect}, got ${kind}`);
    }
    results.push({
      path: p.path,
      expect: p.expect,
      latencyMs: summarize(samples),
      statements: counted.statements / 10,
      statementKinds: Object.fromEntries(Object.entries(counted.kinds).map(([k, v]) => [k, v / 10])),
    });
  }
  return results;
}
