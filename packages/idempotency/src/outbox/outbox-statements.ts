
/** Advisory lock class of the adders of one stream (two-key form: never meets the module's one-key locks). */
export const STREAM_LOCK_CLASS = 0x5afe_0003;

/**
 * Every statement of the outbox, on its table. All run on the database clock
 * (now()) with bound parameters; durations travel as milliseconds.
 * `t`: the escaped table. The channel of NOTIFY is a bound parameter of `add` ($5) and `replay` ($2). */
export function outboxStatements(t: string) {
  return {
    /**
     * Adds messages in the caller's transaction, one row per element of the
     * arrays $1 (topics), $2 (payloads), $3 (streams) and $4 (lanes; NULL for none), their
     * `seq` in the arrays' order: a fan-out is one statement however many
     * messages it writes. The adders of a stream take turns (a
     * transaction-level advisory lock per stream, held to their commit, taken
     * before any row is numbered and in one order, so two adders of the same
     * streams never wait on each other in a cycle): `seq` order within a
     * stream is commit order. NOTIFY is delivered at commit (once: identical
     * notifications of a transaction are folded), and never if the
     * transaction rolls back. Answers the ids in the arrays' order.
     */
    add: `
      WITH entry AS (
             SELECT * FROM unnest($1::text[], $2::jsonb[], $3::text[], $4::text[]) WITH ORDINALITY AS e (topic, payload, stream, lane, n)),
           turn AS (
             SELECT count(pg_advisory_xact_lock(${STREAM_LOCK_CLASS}, h))
               FROM (SELECT DISTINCT hashtext(stream) AS h FROM entry WHERE stream IS NOT NULL ORDER BY h) streams),
           added AS (
             INSERT INTO ${t} (topic, payload, stream, lane)
             SELECT e.topic, e.payload, e.stream, e.lane FROM turn, entry e ORDER BY e.n
             RETURNING id, seq)
      SELECT id, pg_notify($5, '') FROM added ORDER BY seq`,
    /**
     * Claims up to $1 due messages for $2 ms (the lease): pushes their
     * next_attempt_at to the lease's end and counts the attempt. SKIP LOCKED:
     * relays on other instances take other messages, never wait. A message of
     * a stream is due only when no older message of its stream is undelivered
     * (in flight, waiting for a retry, or dead): one in flight per stream.
     *
     * Lanes: of a lane, at most $5 less what this relay has in flight there
     * ($3 lanes, $4 their counts) is taken; messages without a lane are one
     * lane for the order, with no cap. The due messages are ranked within
     * their lane, oldest first, and taken by rank: every lane's oldest before
     * any lane's second, so a lane with a thousand due messages takes no more
     * of a claim than one with a single message. The ranking reads every due
     * message (the `due` index); the rows are locked after it, by id.
     */
    claim: `
      WITH busy AS (
             SELECT * FROM unnest($3::text[], $4::int[]) AS b (lane, n)),
           ranked AS (
             SELECT m.id, m.lane, m.next_attempt_at, m.seq,
                    row_number() OVER (PARTITION BY m.lane ORDER BY m.next_attempt_at, m.seq) AS r
               FROM ${t} m
              WHERE m.delivered_at IS NULL AND m.dead_at IS NULL AND m.next_attempt_at <= now()
                AND (m.stream IS NULL OR NOT EXISTS (
                      SELECT 1 FROM ${t} o WHERE o.stream = m.stream AND o.seq < m.seq AND o.delivered_at IS NULL))),
           picked AS (
             SELECT ranked.id FROM ranked LEFT JOIN busy ON busy.lane = ranked.lane
              WHERE ranked.lane IS NULL OR ranked.r <= $5 - coalesce(busy.n, 0)
              ORDER BY ranked.r, ranked.next_attempt_at, ranked.seq
              LIMIT $1),
           due AS (
             SELECT m.id FROM ${t} m
              WHERE m.id IN (SELECT id FROM picked)
                AND m.delivered_at IS NULL AND m.dead_at IS NULL AND m.next_attempt_at <= now()
                FOR UPDATE SKIP LOCKED)
      UPDATE ${t} m SET attempts = m.attempts + 1, next_attempt_at = now() + $2::int8 * interval '1 millisecond'
        FROM due
       WHERE m.id = due.id AND m.delivered_at IS NULL AND m.dead_at IS NULL
      RETURNING m.id, m.topic, m.payload, m.stream, m.lane, m.attempts`,
    /** Marks deliveries ($1 ids), each fenced on its claim ($2: their attempts, in the same order). */
    delivered: `
      UPDATE ${t} m SET delivered_at = now(), last_error = NULL
        FROM unnest($1::uuid[], $2::int[]) AS d (id, attempts)
       WHERE m.id = d.id AND m.attempts = d.attempts AND m.delivered_at IS NULL`,
    /**
     * Records a failed delivery, fenced on the claim: due again after $3 ms,
     * or dead when that falls past the horizon ($5 ms from retry_from).
     */
    failed: `
      UPDATE ${t}
         SET last_error = $4,
             next_attempt_at = now() + $3::int8 * interval '1 millisecond',
             dead_at = CASE WHEN now() + $3::int8 * interval '1 millisecond' > retry_from + $5::int8 * interval '1 millisecond' THEN now() END
       WHERE id = $1 AND attempts = $2 AND delivered_at IS NULL AND dead_at IS NULL
      RETURNING dead_at IS NOT NULL AS dead`,
    /** Dead letters, oldest first. */
    deadLetters: `
      SELECT id, topic, payload, stream, attempts, last_error AS "lastError",
             to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS "createdAt",
             to_char(dead_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS "deadAt"
        FROM ${t} WHERE dead_at IS NOT NULL ORDER BY seq LIMIT $1`,
    /** Puts dead letters back: due now, attempts from 0, the horizon counted from now. */
    replay: `
      WITH replayed AS (
        UPDATE ${t} SET dead_at = NULL, attempts = 0, next_attempt_at = now(), retry_from = now()
         WHERE id = ANY($1::uuid[]) AND dead_at IS NOT NULL
        RETURNING id)
      SELECT id, pg_notify($2, '') FROM replayed`,
    /** The purge's batch: delivered messages past retention ($2 ms). */
    purge: `
      DELETE FROM ${t}
       WHERE ctid = ANY(ARRAY(
               SELECT ctid FROM ${t}
                WHERE delivered_at <= now() - $2::int8 * interval '1 millisecond'
                ORDER BY delivered_at
                LIMIT $1
                  FOR UPDATE SKIP LOCKED))
         AND delivered_at <= now() - $2::int8 * interval '1 millisecond'`,
  };
}

export type OutboxStatements = ReturnType<typeof outboxStatements>;
