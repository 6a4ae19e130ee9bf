import { KEY_LOCK, NOW_US, REPLACEABLE, replaceableRow } from './statements';

/**
 * The statements of keys claimed by the unit that runs their request
 * (PostgresOneCommitKeys), on a configured table. The claim is a
 * transaction-scoped advisory lock on the key's id, so it ends with the
 * transaction, whichever way that ends; the key's row is written once, with
 * its response, as the transaction's last statement.
 */

/**
 * An in-progress row of a durable claim that nothing resumes and whose owner's
 * lease has ended: the unit takes it over (its final write changes the token,
 * so the old owner's fenced completion matches nothing). `p`: the row's alias and
 * a dot, where a bare column name would be ambiguous.
 */
const abandoned = (p = ''): string => `(${p}status IS NULL AND ${p}recovery IS NULL AND ${p}lease <= ${NOW_US})`;

/** What a claim reads of the key's row `k` ($1 its id, $2 the request's fingerprint). */
const ROW_COLUMNS = `k.id IS NOT NULL AS found, k.fingerprint = $2::bytea AS same, k.status,
       CASE WHEN k.fingerprint = $2::bytea THEN k.body END AS body,
       CASE WHEN k.fingerprint = $2::bytea THEN k.headers END AS headers,
       ${REPLACEABLE} AS expired, ${abandoned()} AS abandoned,
       greatest(k.lease - ${NOW_US}, 0) AS remaining_us,
       floor(extract(epoch FROM k.expires_at - now()) * 1000)::int8 AS retained_ms`;

// One round trip: the lock, the bounds of this transaction (SET LOCAL, through
// set_config(..., true): they end with it), and the key's row as of this
// statement. The lock is tried only when the row leaves the key to be claimed
// (none, past its retention, or abandoned): a completed key is replayed, and a
// key of another request refused, without it, so concurrent retries of a
// finished request never turn each other away (`locked` is then null).
// transaction_timeout exists from PostgreSQL 17 on; before it,
// statement_timeout and idle_in_transaction_session_timeout bound the unit.
//
// The statement's snapshot predates its lock: a unit that committed the key and
// let the lock go in between is not seen in it. So a claim that takes the lock
// reads the row again (ONE_COMMIT_READ_SQL), in a snapshot taken after the lock
// (READ COMMITTED: one per statement), before its handler runs. A pipelined
// client sends the read with the claim: it runs after the claim's lock all the same.
const ONE_COMMIT_CLAIM_SQL = (t: string) => `
SELECT CASE WHEN k.id IS NULL OR ${REPLACEABLE} OR ${abandoned()} THEN pg_try_advisory_xact_lock(${KEY_LOCK}) END AS locked,
       concat(set_config('statement_timeout', $3, true),
              set_config('idle_in_transaction_session_timeout', $3, true),
              CASE WHEN current_setting('server_version_num')::int >= 170000
                   THEN set_config('transaction_timeout', $3, true) END) AS bounded,
       ${ROW_COLUMNS}
  FROM (SELECT 1) one
  LEFT JOIN ${t} k ON k.id = $1::uuid`;

/** The key's row again, read under the claim's lock. */
const ONE_COMMIT_READ_SQL = (t: string) => `
SELECT ${ROW_COLUMNS}
  FROM (SELECT 1) one
  LEFT JOIN ${t} k ON k.id = $1::uuid`;

/** What the key's INSERT raises when the key has a row (unique_violation of the primary key). */
export const KEY_ALREADY_WRITTEN = '23505';

// The last statement before COMMIT, when the claim read no row: a plain INSERT.
// A row there now was committed after the claim's read by a unit that did not
// take the lock (a durable claim of the same key): the primary key refuses the
// INSERT with an error, which aborts the transaction, so its COMMIT rolls back
// even when sent before the answer (a pipelined client, see key-queries.ts);
// the caller claims again (LeaseLostError), which reads that row.
const ONE_COMMIT_INSERT_SQL = (t: string) => `
INSERT INTO ${t} AS k (id, lease, expires_at, fingerprint, status, body, headers)
VALUES ($1::uuid, ${NOW_US}, now() + $6::int8 * interval '1 millisecond', $2::bytea, $3::int2, $4::text, $5::text)`;

// The last statement before COMMIT, when the claim read a row. It is replaced
// only when the claim could take it (past its retention, or abandoned); any
// other row was committed after the claim's read by a unit that did not take
// the lock: no row is written, the caller rolls back (LeaseLostError) and
// claims again, which reads that row. The primary key is the fence: two units
// can never both commit the key.
const ONE_COMMIT_COMPLETE_SQL = (t: string) => `${ONE_COMMIT_INSERT_SQL(t)}
ON CONFLICT (id) DO UPDATE
   SET lease = EXCLUDED.lease, expires_at = EXCLUDED.expires_at, fingerprint = EXCLUDED.fingerprint,
       status = EXCLUDED.status, body = EXCLUDED.body, headers = EXCLUDED.headers, recovery = NULL
 WHERE ${replaceableRow('k')} OR ${abandoned('k.')}`;

/** The one-commit statements on the keys table `table`. */
export function oneCommitStatements(table: string) {
  return { claim: ONE_COMMIT_CLAIM_SQL(table), read: ONE_COMMIT_READ_SQL(table), insert: ONE_COMMIT_INSERT_SQL(table), complete: ONE_COMMIT_COMPLETE_SQL(table) };
}

export type OneCommitStatements = ReturnType<typeof oneCommitStatements>;
