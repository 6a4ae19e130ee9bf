/**
 * Every statement of the PostgreSQL store and of the purge, on a configured
 * table (the escaped identifier, see IdempotencyTable). The protocol they
 * implement is told in postgres-idempotency.store.ts.
 */

/** The database clock in microseconds since the epoch: the unit of `lease`, the fencing token. */
export const NOW_US = `(extract(epoch FROM now()) * 1000000)::int8`;

/**
 * A key past its expiry that nothing can resume: finished (its retention ran out
 * from its completion), or abandoned before any recovery point. Such a key is
 * new again (replace) and may be purged: the claim and the purge share this
 * condition.
 */
export const REPLACEABLE = replaceable('');

/** REPLACEABLE for the row of table alias `alias` (where a bare column name would be ambiguous). */
export const replaceableRow = (alias: string): string => replaceable(`${alias}.`);

function replaceable(p: string): string {
  return `(${p}expires_at <= now() AND (${p}status IS NOT NULL OR (${p}lease <= ${NOW_US} AND ${p}recovery IS NULL)))`;
}

/** The advisory lock of a key: a 64-bit hash of its id (the other form, two int4, is another key space). */
export const KEY_LOCK = `hashtextextended($1::text, 0)`;

/**
 * Whether some session holds the lock of key $1 now (read from pg_locks: an
 * int8 advisory lock is its high half in classid, its low half in objid,
 * objsubid 1).
 */
export const KEY_LOCK_HELD = `EXISTS (
  SELECT 1 FROM pg_locks l
   WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
     AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
     AND l.classid = ((${KEY_LOCK} >> 32) & 4294967295)::oid
     AND l.objid = (${KEY_LOCK} & 4294967295)::oid)`;

// The existing row is read first, in the same statement: when it is there the
// INSERT is not even attempted, so a duplicate never waits on the owner's
// uncommitted completion (an INSERT that meets a row being updated would wait
// for that transaction to end). When the row committed after this statement's
// snapshot, neither branch returns a row: the caller answers 409, retry.
const CLAIM_SQL = (t: string) => `
WITH cur AS (
  SELECT lease, fingerprint = $2::bytea AS same, status, body, headers,
         ${REPLACEABLE} AS expired, lease - ${NOW_US} AS remaining_us,
         floor(extract(epoch FROM expires_at - now()) * 1000)::int8 AS retained_ms
    FROM ${t}
   WHERE id = $1::uuid
), ins AS (
  INSERT INTO ${t} (id, lease, expires_at, fingerprint)
  SELECT $1::uuid, ${NOW_US} + $3::int8 * 1000, now() + $4::int8 * interval '1 millisecond', $2::bytea
   WHERE NOT EXISTS (SELECT 1 FROM cur)
  ON CONFLICT (id) DO NOTHING
  RETURNING lease
)
SELECT lease::text AS lease, true AS claimed, NULL::bool AS same, NULL::int2 AS status,
       NULL::text AS body, NULL::text AS headers, NULL::bool AS expired, NULL::int8 AS remaining_us,
       NULL::int8 AS retained_ms
  FROM ins
UNION ALL
SELECT lease::text, false, same, status, CASE WHEN same THEN body END, CASE WHEN same THEN headers END,
       expired, remaining_us, retained_ms
  FROM cur`;

const TAKEOVER_SQL = (t: string) => `
UPDATE ${t} SET lease = ${NOW_US} + $3::int8 * 1000
 WHERE id = $1::uuid AND lease = $2::int8
   AND status IS NULL AND lease <= ${NOW_US}
RETURNING lease::text AS lease, recovery`;

const REPLACE_SQL = (t: string) => `
UPDATE ${t}
   SET fingerprint = $4::bytea, lease = ${NOW_US} + $3::int8 * 1000,
       expires_at = now() + $5::int8 * interval '1 millisecond', status = NULL, body = NULL, headers = NULL
 WHERE id = $1::uuid AND lease = $2::int8 AND ${REPLACEABLE}
RETURNING lease::text AS lease`;

// The statements fenced on the owner's token run inside a business transaction:
// when one matches no row, the key is no longer the caller's, and LeaseLostError
// rolls that transaction back. A lost lease can never commit.

/** What the completion and a recovery point raise when they matched no row (division_by_zero, see COMPLETE_SQL). */
export const FENCED_WRITE_REFUSED = '22012';

// Clears the recovery point (NULL stays NULL on other routes, so their completion
// stays a HOT update; see the migration of the recovery index). The retention
// starts here, at the outcome. When the UPDATE matches no row, the statement
// raises an error (1 / 0: plain SQL has no other way to raise), which aborts the
// transaction: its COMMIT then rolls back even when sent before the answer
// (a pipelined client, see key-queries.ts).
const COMPLETE_SQL = (t: string) => `
WITH completed AS (
UPDATE ${t} SET status = $3::int2, body = $4::text, headers = $5::text, recovery = NULL,
       expires_at = now() + $6::int8 * interval '1 millisecond'
 WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL
RETURNING 1
)
SELECT 1 / count(*) AS completed FROM completed`;

// The owner's own compare-and-set: a later lease, and a token larger than any
// before it (GREATEST: even a lease that was extended further stays ordered).
const RENEW_SQL = (t: string) => `
UPDATE ${t} SET lease = GREATEST(${NOW_US} + $3::int8 * 1000, lease + 1)
 WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL
RETURNING lease::text AS lease`;

// A phase's recovery point, fenced like the completion (an error when it matches
// no row), in the phase's transaction: its COMMIT may be sent before its answer.
const CHECKPOINT_SQL = (t: string) => `
WITH checkpointed AS (
UPDATE ${t} SET recovery = $3::jsonb
 WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL
RETURNING 1
)
SELECT 1 / count(*) AS checkpointed FROM checkpointed`;

// SKIP LOCKED: instances running the recovery job at once split the work; the
// lease compare-and-set makes each takeover a single winner against retries too.
const TAKE_OVER_ABANDONED_SQL = (t: string) => `
WITH abandoned AS (
  SELECT id, lease FROM ${t}
   WHERE recovery IS NOT NULL AND status IS NULL AND lease <= ${NOW_US}
   ORDER BY lease
   LIMIT 1
   FOR UPDATE SKIP LOCKED
)
UPDATE ${t} k SET lease = ${NOW_US} + $1::int8 * 1000
  FROM abandoned a
 WHERE k.id = a.id AND k.lease = a.lease
RETURNING k.id::text AS id, k.lease::text AS lease, k.recovery`;

// One operation by its key, when its lease has ended (abandoned, or given up
// after an unknown outcome): the same compare-and-set as any takeover.
const TAKE_OVER_OPERATION_SQL = (t: string) => `
UPDATE ${t} SET lease = ${NOW_US} + $2::int8 * 1000
 WHERE id = $1::uuid AND recovery IS NOT NULL AND status IS NULL AND lease <= ${NOW_US}
RETURNING id::text AS id, lease::text AS lease, recovery`;

// What a client may be told about its key: nothing is written, nothing locked.
// A key claimed by a unit that commits once has no row until that unit
// commits: it is in progress while some session holds its lock (pg_locks is
// read only when the row leaves the key to be claimed: none, or forgotten).
const OUTCOME_SQL = (t: string) => `
SELECT k.id IS NOT NULL AS found, status, ${REPLACEABLE} AS forgotten, greatest(lease - ${NOW_US}, 0) / 1000 AS remaining_ms,
       to_json(expires_at) #>> '{}' AS expires_at,
       CASE WHEN k.id IS NULL OR ${REPLACEABLE} THEN ${KEY_LOCK_HELD} END AS locked
  FROM (SELECT 1) one
  LEFT JOIN ${t} k ON k.id = $1::uuid`;

// An operation that ends with nothing done: the key and its recovery point go,
// fenced like the completion, in the transaction that undoes the phases.
const DISCARD_SQL = (t: string) => `
DELETE FROM ${t}
 WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL`;

// After an attempt that did not end its operation: the key goes only if no
// recovery point committed. A phase whose COMMIT took effect although its acknowledgement
// was lost has left one: the key is then kept with it and its lease ends now,
// so the next attempt (a retry or the recovery job) resumes the operation.
const RELEASE_UNLESS_CHECKPOINTED_SQL = (t: string) => `
WITH gone AS (
  DELETE FROM ${t}
   WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL AND recovery IS NULL
  RETURNING 1
)
UPDATE ${t} SET lease = ${NOW_US}
 WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL AND recovery IS NOT NULL AND lease > ${NOW_US}`;

/** The store's statements on the keys table `table`. */
export function keyStatements(table: string) {
  return {
    claim: CLAIM_SQL(table),
    takeover: TAKEOVER_SQL(table),
    renew: RENEW_SQL(table),
    outcome: OUTCOME_SQL(table),
    replace: REPLACE_SQL(table),
    complete: COMPLETE_SQL(table),
    checkpoint: CHECKPOINT_SQL(table),
    takeOverAbandoned: TAKE_OVER_ABANDONED_SQL(table),
    takeOverOperation: TAKE_OVER_OPERATION_SQL(table),
    release: RELEASE_UNLESS_CHECKPOINTED_SQL(table),
    discard: DISCARD_SQL(table),
  };
}

export type KeyStatements = ReturnType<typeof keyStatements>;

// The purge (see IdempotencyPurgeService). The outer WHERE repeats the inner
// one: the subquery has locked the rows, so it cannot change the result; it
// keeps the rule visible in the statement that deletes.
const PURGE_KEYS_BATCH_SQL = (t: string) => `
DELETE FROM ${t}
 WHERE ctid = ANY(ARRAY(
         SELECT ctid FROM ${t}
          WHERE ${REPLACEABLE}
          ORDER BY expires_at
          LIMIT $1
            FOR UPDATE SKIP LOCKED))
   AND ${REPLACEABLE}`;

// Processed messages: committed with their effect, so past expires_at is all it takes.
const PURGE_MESSAGES_BATCH_SQL = (t: string) => `
DELETE FROM ${t}
 WHERE ctid = ANY(ARRAY(
         SELECT ctid FROM ${t}
          WHERE expires_at <= now()
          ORDER BY expires_at
          LIMIT $1
            FOR UPDATE SKIP LOCKED))
   AND expires_at <= now()`;

/** The purge's batches: of the keys table, and of the processed messages table. */
export function purgeStatements(keysTable: string, messagesTable: string): { keys: string; messages: string } {
  return { keys: PURGE_KEYS_BATCH_SQL(keysTable), messages: PURGE_MESSAGES_BATCH_SQL(messagesTable) };
}
