import { Client } from 'pg';
import { keyIdSql } from './keys-table';

/**
 * Opens the one window a claim leaves to a concurrent one, for as long as a
 * race needs it: the claim of a key reads the key's row and inserts it only
 * when it read none, in one statement, and a claim whose read came before
 * another's insert committed meets that insert at the primary key instead.
 * Left to timing, 100 identical requests over HTTP almost never put two claims
 * there at once (the requests reach the database a few at a time), so a claim
 * that let both win (`ON CONFLICT DO UPDATE` for `DO NOTHING`: two owners, two
 * executions) would pass the race.
 *
 * A transaction of the test's own inserts the key's row (under each of
 * `scopes`, the principals whose claims will try to insert it) and keeps it
 * uncommitted: each claim reads no row, tries its insert and waits on ours,
 * where `claimsWaiting()` sees it (pg_stat_activity). release() rolls back: the waiting claims go on
 * together, one inserts, and every other one meets that insert just as a claim
 * that lost the race by a microsecond does. A correct claim answers them 409;
 * a broken one makes each an owner. Nothing is slept: the window stays open
 * until the claims are in it.
 */
export interface HeldKey {
  /** Resolves once at least `atLeast` claims of the key wait on the held row; answers how many do. */
  claimsWaiting(atLeast: number): Promise<number>;
  release(): Promise<void>;
}

const ANY_FINGERPRINT = Buffer.alloc(16);

export async function holdKey(databaseUrl: string, key: string, scopes: string[], table = 'idempotency_keys'): Promise<HeldKey> {
  const holder = new Client({ connectionString: databaseUrl, application_name: 'test-held-key' });
  const watcher = new Client({ connectionString: databaseUrl, application_name: 'test-held-key-watch' });
  await Promise.all([holder.connect(), watcher.connect()]);
  const t = holder.escapeIdentifier(table);
  try {
    await holder.query('BEGIN');
    await holder.query(
      `INSERT INTO ${t} (id, lease, expires_at, fingerprint)
       SELECT ${keyIdSql('s', '$1::text')}, 0, now(), $2::bytea FROM unnest($3::text[]) s`,
      [key, ANY_FINGERPRINT, scopes],
    );
  } catch (error) {
    await Promise.all([holder.end(), watcher.end()]);
    throw error;
  }
  const [{ pid }] = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;
  let released: Promise<void> | undefined;
  return {
    async claimsWaiting(atLeast) {
      // Only a hang is bounded: the requests are already sent.
      const deadline = Date.now() + 30_000;
      for (;;) {
        const { rows } = await watcher.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND $1::int = ANY (pg_blocking_pids(pid))
              AND query LIKE '%ON CONFLICT%'`,
          [pid],
        );
        if (rows[0].n >= atLeast) return rows[0].n;
        if (Date.now() > deadline) throw new Error(`only ${rows[0].n} claims came to wait on the held key within 30 s (${atLeast} expected)`);
        await new Promise((r) => setImmediate(r));
      }
    },
    release: () =>
      (released ??= (async () => {
        try {
          await holder.query('ROLLBACK');
        } finally {
          await Promise.all([holder.end(), watcher.end()]);
        }
      })()),
  };
}
