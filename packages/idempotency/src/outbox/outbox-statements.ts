
/** Advisory lock class of the adders of one stream (two-key form: never meets the module's one-key locks). */
export const STREAM_LOCK_CLASS = 0x5afe_0003;

/**
 * Every statement of the outbox, on its table. All run on the database clock
 * (now()) with bound parameters; durations travel as milliseconds.
 * `t`: the escaped table. The channel of NOTIFY is a bound parameter of `add` ($6) and `replay` ($2). */
export function outboxStatements(t: string) {
  /** Whether message `m` is waiting: neither delivered nor dead (the predicate of the due indexes). */
  const waiting = (m: string) => `${m}.delivered_at IS NULL AND ${m}.dead_at IS NULL`;
  /** Whether message `m` is waiting and its time has come. */
  const timeCome = (m: string) => `${waiting(m)} AND ${m}.next_attempt_at <= now()`;
  /**
   * Whether message `m` is due: its time come, and (of a stream) no older
   * message of its stream undelivered (in flight, waiting for a retry, or dead).
   */
  const due = (m: string) => `${timeCome(m)}
                  AND (${m}.stream IS NULL OR NOT EXISTS (
                        SELECT 1 FROM ${t} o WHERE o.stream = ${m}.stream AND o.seq < ${m}.seq AND o.delivered_at IS NULL))`;
  return {
    /**
     * Adds messages in the caller's transaction, one row per element of the
     * arrays $1 (topics), $2 (payloads), $3 (streams), $4 (lanes) and $5 (their
     * groups; NULL for none), their
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
             SELECT * FROM unnest($1::text[], $2::jsonb[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS e (topic, payload, stream, lane, lane_group, n)),
           turn AS (
             SELECT count(pg_advisory_xact_lock(${STREAM_LOCK_CLASS}, h))
               FROM (SELECT DISTINCT hashtext(stream) AS h FROM entry WHERE stream IS NOT NULL ORDER BY h) streams),
           added AS (
             INSERT INTO ${t} (topic, payload, stream, lane, lane_group)
             SELECT e.topic, e.payload, e.stream, e.lane, e.lane_group FROM turn, entry e ORDER BY e.n
             RETURNING id, seq)
      SELECT id, pg_notify($6, '') FROM added ORDER BY seq`,
    /**
     * Claims up to $1 due messages for $2 ms (the lease): pushes their
     * next_attempt_at to the lease's end and counts the attempt. SKIP LOCKED:
     * relays on other instances take other messages, never wait. A message of
     * a stream is due only when no older message of its stream is undelivered
     * (in flight, waiting for a retry, or dead): one in flight per stream.
     *
     * Lanes and their groups, against what this relay has in flight ($3
     * lanes, $4 their counts; $6 groups, $7 their counts). A due message's
     * lane share is its lane's count plus its rank in its lane (oldest
     * first): the lane's deliveries in flight once it is taken; at most $5.
     * Its group share is, likewise, its group's count plus its rank among
     * its group's messages within the lane cap, ranked by lane share (every
     * lane of the group in turn, the one with the fewest in flight first);
     * at most $8. A lane without a group is a group of its own (its group
     * share is its lane share). The messages are taken by group share, then
     * lane share, then age: a freed slot goes to the group with the fewest in
     * flight, and within it to its lane with the fewest, so a group with 16
     * lanes takes no more of a claim than a group with one, and a lane with
     * a thousand due messages no more than a lane with one. Messages without
     * a lane are one lane and one group for this order, with no cap (only
     * their $1 oldest can be taken: only those are ranked by group). Only
     * what can be taken is read (`lane_due_idx`): the lanes with a message
     * waiting, one index probe each (`waiting_lanes`: a lane whose messages
     * all wait for a retry or a lease is one probe, however many they are),
     * and each lane's $5 oldest due messages, with the $1 oldest without a
     * lane (`candidate`); the rows are locked after the ranking, by id; the
     * next due time is one more probe a lane. Each step reads through its key
     * or `lane_due_idx`, the outbox's only index of the waiting messages, so
     * the plan holds whatever the planner believes of the table: a burst's
     * statistics lag (a healthy outbox's count almost nothing waiting).
     *
     * Answers one row: `messages`, the claimed ones; `full`, whether as many
     * were picked as asked (more may be due; when not, every due message it
     * left is held back by a lane's or group's cap, full once it ran, or
     * locked by another relay's claim); `next_due_ms`, in how many ms the next
     * waiting message comes due (a retry, a lease's end; NULL: none waits).
     */
    claim: `
      WITH RECURSIVE lanes AS (
             SELECT * FROM unnest($3::text[], $4::int[]) AS b (lane, n)),
           groups AS (
             SELECT * FROM unnest($6::text[], $7::int[]) AS g (lane_group, n)),
           waiting_lanes AS (
             (SELECT m.lane FROM ${t} m
               WHERE m.lane IS NOT NULL AND ${waiting('m')}
               ORDER BY m.lane LIMIT 1)
             UNION ALL
             SELECT (SELECT m.lane FROM ${t} m
                      WHERE m.lane > w.lane AND ${waiting('m')}
                      ORDER BY m.lane LIMIT 1)
               FROM waiting_lanes w WHERE w.lane IS NOT NULL),
           candidate AS (
             SELECT c.* FROM waiting_lanes d CROSS JOIN LATERAL (
               SELECT m.id, m.lane, m.lane_group, m.next_attempt_at, m.seq FROM ${t} m
                WHERE m.lane = d.lane AND ${due('m')}
                ORDER BY m.lane, m.next_attempt_at, m.seq LIMIT $5) c
             UNION ALL
             (SELECT m.id, m.lane, m.lane_group, m.next_attempt_at, m.seq FROM ${t} m
               WHERE m.lane IS NULL AND ${due('m')}
               ORDER BY m.lane, m.next_attempt_at, m.seq LIMIT $1)),
           in_lane AS (
             SELECT c.id, c.lane, c.lane_group, c.next_attempt_at, c.seq, coalesce(lanes.n, 0) AS lane_busy,
                    coalesce(lanes.n, 0) + row_number() OVER (PARTITION BY c.lane ORDER BY c.next_attempt_at, c.seq) AS lane_share
               FROM candidate c LEFT JOIN lanes ON lanes.lane = c.lane),
           in_group AS (
             SELECT in_lane.id, in_lane.lane, in_lane.next_attempt_at, in_lane.seq, in_lane.lane_share,
                    CASE WHEN in_lane.lane_group IS NULL THEN in_lane.lane_busy ELSE coalesce(groups.n, 0) END
                    + row_number() OVER (PARTITION BY in_lane.lane_group, CASE WHEN in_lane.lane_group IS NULL THEN in_lane.lane END
                                         ORDER BY in_lane.lane_share, in_lane.next_attempt_at, in_lane.seq) AS group_share
               FROM in_lane LEFT JOIN groups ON groups.lane_group = in_lane.lane_group
              WHERE in_lane.lane_share <= CASE WHEN in_lane.lane IS NULL THEN $1::int8 ELSE $5::int8 END),
           picked AS (
             SELECT id FROM in_group
              WHERE lane IS NULL OR group_share <= $8
              ORDER BY group_share, lane_share, next_attempt_at, seq
              LIMIT $1),
           due AS (
             -- Each picked row locked through its key alone, then checked as locked (its latest
             -- version): LIMIT keeps the check out of the lookup, so no plan scans the due for it.
             SELECT l.id FROM picked p CROSS JOIN LATERAL (
               SELECT m.id, m.delivered_at, m.dead_at, m.next_attempt_at FROM ${t} m
                WHERE m.id = p.id LIMIT 1
                  FOR UPDATE SKIP LOCKED) l
              WHERE ${timeCome('l')}),
           claimed AS (
             -- Locked above and still waiting: updated through its key alone.
             UPDATE ${t} m SET attempts = m.attempts + 1, next_attempt_at = now() + $2::int8 * interval '1 millisecond'
               FROM due
              WHERE m.id = due.id
             RETURNING m.id, m.topic, m.payload, m.stream, m.lane, m.lane_group, m.attempts)
      SELECT coalesce((SELECT json_agg(claimed) FROM claimed), '[]') AS messages,
             (SELECT count(*) FROM picked) >= $1 AS full,
             (SELECT ceil(extract(epoch FROM min(n.at) - now()) * 1000)::float8 FROM (
                SELECT (SELECT m.next_attempt_at FROM ${t} m
                         WHERE m.lane = w.lane AND ${waiting('m')} AND m.next_attempt_at > now()
                         ORDER BY m.lane, m.next_attempt_at LIMIT 1) AS at
                  FROM waiting_lanes w WHERE w.lane IS NOT NULL
                UNION ALL
                SELECT (SELECT m.next_attempt_at FROM ${t} m
                         WHERE m.lane IS NULL AND ${waiting('m')} AND m.next_attempt_at > now()
                         ORDER BY m.lane, m.next_attempt_at LIMIT 1)) n) AS next_due_ms`,
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

/** The claim's answer. */
export interface ClaimAnswer {
  messages: OutboxMessageRow[];
  full: boolean;
  next_due_ms: number | null;
}

/** A claimed message, as the claim answers it. */
export interface OutboxMessageRow {
  id: string;
  topic: string;
  payload: unknown;
  stream: string | null;
  lane: string | null;
  lane_group: string | null;
  attempts: number;
}
