import { Client } from 'pg';
import { RELAY_GROUP_CAP, RELAY_LANE_CAP, RELAY_SLOTS } from '../packages/idempotency/src/outbox/outbox-relay';
import { outboxStatements } from '../packages/idempotency/src/outbox/outbox-statements';
import { median, round } from './lib/stats';

/** One shape of the outbox's table: how many messages are due, in how many lanes. */
export interface ClaimCost {
  due: number;
  lanes: number;
  /** The claim's round trip, ms: median of RUNS, with the table's statistics current. */
  ms: number;
  /** The same, with the statistics of before the due messages were added (a burst, before autovacuum's ANALYZE). */
  staleMs: number;
}

const SHAPES: [due: number, lanes: number][] = [
  [5, 1],
  [1_000, 1],
  [5_000, 1],
  [1_000, 50],
  [5_000, 500],
];
const DELIVERED = 20_000;
const RUNS = 60;

/**
 * §12, the claim on its own: the relay's claim statement (prepared, as the
 * relay sends it) against a copy of the outbox's table (its indexes included)
 * holding DELIVERED delivered messages and the due ones of each shape, one
 * lane of them with 2 in flight; each claim rolled back, so every run finds
 * the same table. Times the claim's round trip alone, on one connection:
 * first with the statistics ANALYZE took of the delivered messages alone (a
 * burst, before autovacuum sees it), then with current ones.
 */
export async function claimCost(databaseUrl: string, log: (m: string) => void): Promise<ClaimCost[]> {
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  const table = 'bench_claim_outbox';
  const claim = outboxStatements(table).claim;
  const results: ClaimCost[] = [];
  try {
    for (const [due, lanes] of SHAPES) {
      // Statistics only from the ANALYZEs below: autovacuum would refresh them in the middle of a timing.
      await db.query(`DROP TABLE IF EXISTS ${table}; CREATE TABLE ${table} (LIKE idempotency_outbox INCLUDING ALL) WITH (autovacuum_enabled = false)`);
      await db.query(
        `INSERT INTO ${table} (topic, payload, lane, lane_group, delivered_at)
         SELECT 'bench', '{"n":1}', 'lane_' || (i % 50), 'group_' || (i % 5), now() FROM generate_series(1, $1) i`,
        [DELIVERED],
      );
      await db.query(`ANALYZE ${table}`);
      await db.query(
        `INSERT INTO ${table} (topic, payload, lane, lane_group)
         SELECT 'bench', jsonb_build_object('n', i, 'data', repeat('x', 300)), 'lane_' || (i % $2), 'group_' || (i % $2 % 5)
           FROM generate_series(1, $1) i`,
        [due, lanes],
      );
      const staleMs = await timeClaim(db, claim);
      await db.query(`VACUUM ANALYZE ${table}`);
      const ms = await timeClaim(db, claim);
      results.push({ due, lanes, ms, staleMs });
      log(`§12 claim: ${due} due in ${lanes} lane(s), ${ms} ms (statistics of before them: ${staleMs} ms)`);
    }
    await db.query(`DROP TABLE ${table}`);
  } finally {
    await db.end();
  }
  return results;
}

/** The median of RUNS claims (after 5 unmeasured: prepared, its plan settled; ANALYZE makes a new one), each rolled back. */
async function timeClaim(db: Client, claim: string): Promise<number> {
  const values = [RELAY_SLOTS, 30_000, ['lane_0'], [2], RELAY_LANE_CAP, ['group_0'], [2], RELAY_GROUP_CAP];
  const samples: number[] = [];
  await db.query('BEGIN');
  for (let run = 0; run < RUNS + 5; run++) {
    await db.query('SAVEPOINT claim');
    const start = performance.now();
    await db.query({ name: 'bench_outbox_claim', text: claim, values });
    if (run >= 5) samples.push(performance.now() - start);
    await db.query('ROLLBACK TO SAVEPOINT claim');
  }
  await db.query('ROLLBACK');
  return round(median(samples), 2);
}
