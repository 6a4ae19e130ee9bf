import { createStoreHarness } from './lib/app';
import { openBenchDatabase } from './lib/database';
import { storage } from './storage';

/**
 * `npm run bench:storage-commit`: §4 storage per key written each way a route
 * can commit it (durable: claim, then the completion's UPDATE; one: a single
 * INSERT with the response), on the same database, one after the other.
 * BENCH_STORAGE_KEYS keys each (default 100,000).
 */
async function main(): Promise<void> {
  const keys = Number(process.env.BENCH_STORAGE_KEYS || 100_000);
  const log = (m: string) => console.error(`[bench] ${m}`);
  const db = await openBenchDatabase(log);
  const h = await createStoreHarness(db.url);
  try {
    for (const commit of ['durable', 'one'] as const) {
      const r = await storage(h, keys, 20, 'reference', commit);
      console.log(
        `commit ${commit}: ${r.keys} keys, body ${r.bodyBytes} B, ${r.keysPerSecond} keys/s; bytes per key ${r.withoutVacuum.bytesPerKey} without VACUUM (dead tuples ${r.withoutVacuum.deadTuples}), ${r.afterVacuum.bytesPerKey} after VACUUM, ${r.afterVacuumFull.bytesPerKey} after VACUUM FULL`,
      );
    }
  } finally {
    await h.context.close();
    await db.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
