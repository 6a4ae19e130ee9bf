import { Injectable } from '@nestjs/common';
import { SqlRepository } from '../database/sql-repository';
import { AdmissionRow, admissionCtes, succeededCte } from '../webhook-endpoints/webhook-endpoints.repository';

/** One delivery of an event to an endpoint: an outbox message. */
export interface Delivery {
  clientId: string;
  eventId: string;
  endpointId: string;
  messageId: string;
}

/** How an attempt ended: the receiver's answer, or what kept it from one. */
export interface AttemptOutcome {
  status: number | null;
  excerpt: string | null;
  errorClass: string | null;
  error: string | null;
}

/** A failed attempt's retry: the receiver's Retry-After, if any. */
export interface RetryRule {
  afterSeconds: number | null;
  afterAt: string | null;
}

/**
 * Where a message stands in its schedule: attempts made, whether the next is
 * due (`over`: none is left), and, not due, the ms until it is; its
 * endpoint's admission (AdmissionRow; all null when the endpoint is deleted);
 * and the attempt started, when it was due and admitted (else null).
 */
export type Begun = {
  made: number;
  due: boolean;
  over: boolean;
  wait_ms: number | null;
  attempt_id: string | null;
} & ({ url: string } & AdmissionRow | { [K in keyof AdmissionRow]: null });

/** The ms from now() until `column`, a time ahead (never 'infinity'); NULL otherwise. Rounded up: never early. */
const MS_UNTIL = (column: string) =>
  `CASE WHEN ${column} > now() AND ${column} <> 'infinity' THEN ceil(extract(epoch FROM ${column} - now()) * 1000)::float8 END`;

/** An attempt as the API lists it; times are the database's, as text. */
export interface AttemptRow {
  id: string;
  endpoint_id: string;
  attempt: number;
  status: number | null;
  error_class: string | null;
  error: string | null;
  response_excerpt: string | null;
  started_at: string;
  finished_at: string | null;
  duration_ms: number | null;
}

/**
 * Text PostgreSQL stores, whatever bytes the receiver answered: decoded as
 * UTF-8 (invalid sequences already U+FFFD), a NUL, which a text column
 * refuses, becomes U+FFFD too.
 */
function storable(text: string | null): string | null {
  return text === null ? null : text.replaceAll('\u0000', '\uFFFD');
}

/** An attempt that ended: its outcome and, failed, its retry rule. */
export interface FinishedAttempt {
  clientId: string;
  endpointId: string;
  id: string;
  outcome: AttemptOutcome;
  retry?: RetryRule;
}

/**
 * Each attempt to deliver an event to an endpoint, written outside any
 * transaction by the relay: started before the request is sent (begin),
 * finished with its outcome, so an attempt cut short (a process killed) keeps its row. The
 * attempts of one outbox message (`message_id`) are its place in the retry
 * schedule: a failed one holds the time of the next (`retry_at`). Both take
 * many deliveries in one statement (their arrays, one element a delivery) and
 * answer one result a delivery, in order.
 */
@Injectable()
export class WebhookDeliveriesRepository extends SqlRepository {
  /**
   * Where each message stands (Begun), its endpoint admitted (admissionCtes:
   * a probe taken only when due), and, due and admitted, its attempt started
   * (its number, the attempts so far plus one), in one statement. The turn
   * is the latest attempt's retry_at (none while unfinished: due). A batch
   * holds a message at most once (the relay hands a message over once at a time).
   */
  async begin(ds: readonly Delivery[], probeLeaseS: number, overlap: string): Promise<Begun[]> {
    const rows = await this.rows<Begun & { n: string }>(
      `WITH turn AS (
         SELECT i.n, i.client_id, i.event_id, i.endpoint_id, i.message_id, t.*, t.due AND NOT t.over AS wants
           FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::uuid[]) WITH ORDINALITY AS i(client_id, event_id, endpoint_id, message_id, n)
           CROSS JOIN LATERAL (
             SELECT count(*)::int AS made,
                    coalesce((array_agg(retry_at IS NULL OR retry_at <= now() ORDER BY created_at DESC, id DESC))[1], true) AS due,
                    coalesce((array_agg(retry_at = 'infinity' ORDER BY created_at DESC, id DESC))[1], false) AS over,
                    (array_agg(${MS_UNTIL('retry_at')} ORDER BY created_at DESC, id DESC))[1] AS wait_ms
               FROM webhook_deliveries d WHERE d.client_id = i.client_id AND d.message_id = i.message_id) t),
       ${admissionCtes({ deliveries: 'turn', lease: '$5', overlap: '$6' })},
       started AS (
         INSERT INTO webhook_deliveries (client_id, event_id, endpoint_id, message_id, attempt)
         SELECT t.client_id, t.event_id, t.endpoint_id, t.message_id, t.made + 1 FROM turn t JOIN admission a ON a.n = t.n WHERE t.wants AND a.admitted
         RETURNING client_id, message_id, id)
       SELECT t.n, t.made, t.due, t.over, t.wait_ms, a.url, a.secret, a.previous_secret, a.disabled, a.admitted, a.probe_in_ms, s.id AS attempt_id
         FROM turn t LEFT JOIN admission a ON a.n = t.n LEFT JOIN started s ON s.client_id = t.client_id AND s.message_id = t.message_id
        ORDER BY t.n`,
      [ds.map((d) => d.clientId), ds.map((d) => d.eventId), ds.map((d) => d.endpointId), ds.map((d) => d.messageId), probeLeaseS, overlap],
    );
    return rows.map(({ n: _, ...begun }) => begun as Begun);
  }

  /**
   * The attempts' outcomes; a failed one (`retry` given) also gets its
   * message's next time, on the database's clock: the first step of the
   * schedule (`scheduleS`, seconds, counted from the message's first attempt) still ahead and not
   * before the Retry-After; a Retry-After past the last step, the last step
   * still ahead; none left, 'infinity'. A succeeded one clears its endpoint's
   * failures in the same statement (succeededCte). Answers, per attempt, the
   * ms until that next time (undefined: succeeded, none left, or no such attempt).
   */
  async finish(attempts: readonly FinishedAttempt[], scheduleS: readonly number[]): Promise<(number | undefined)[]> {
    const column = <T>(f: (a: FinishedAttempt) => T) => attempts.map(f);
    const rows = await this.rows<{ n: string; wait_ms: number | null }>(
      `WITH input AS (
         SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::int[], $5::text[], $6::text[], $7::text[], $8::boolean[], $9::int8[], $10::timestamptz[])
                WITH ORDINALITY AS i(client_id, id, endpoint_id, status, excerpt, error_class, error, failed, after_s, after_at, n)),
       retry AS (
         SELECT i.n, coalesce(min(step.at) FILTER (WHERE asked.at IS NULL OR step.at >= asked.at), max(step.at), 'infinity') AS at
           FROM input i
           CROSS JOIN LATERAL (
             SELECT min(created_at) AS at FROM webhook_deliveries
              WHERE client_id = i.client_id AND message_id = (SELECT message_id FROM webhook_deliveries WHERE client_id = i.client_id AND id = i.id)) first
           CROSS JOIN LATERAL (SELECT coalesce(now() + i.after_s * interval '1 second', i.after_at) AS at) asked
           LEFT JOIN LATERAL (
             SELECT first.at + o * interval '1 second' AS at FROM unnest($11::int[]) o WHERE first.at + o * interval '1 second' > now()) step ON true
          WHERE i.failed
          GROUP BY i.n),
       ${succeededCte({ succeeded: 'SELECT client_id, endpoint_id FROM input WHERE NOT failed' })}
       UPDATE webhook_deliveries d SET status = i.status, response_excerpt = i.excerpt, error_class = i.error_class, error = i.error,
              finished_at = now(), retry_at = retry.at
         FROM input i LEFT JOIN retry ON retry.n = i.n
        WHERE d.client_id = i.client_id AND d.id = i.id
       RETURNING i.n, ${MS_UNTIL('d.retry_at')} AS wait_ms`,
      [
        column((a) => a.clientId),
        column((a) => a.id),
        column((a) => a.endpointId),
        column((a) => a.outcome.status),
        column((a) => storable(a.outcome.excerpt)),
        column((a) => a.outcome.errorClass),
        column((a) => storable(a.outcome.error)),
        column((a) => a.retry !== undefined),
        column((a) => a.retry?.afterSeconds ?? null),
        column((a) => a.retry?.afterAt ?? null),
        scheduleS,
      ],
    );
    const waits = new Map(rows.map((r) => [Number(r.n), r.wait_ms ?? undefined]));
    return attempts.map((_, i) => waits.get(i + 1));
  }

  /** An event's attempts, newest first (at most `limit`). */
  list(clientId: string, eventId: string, limit: number): Promise<AttemptRow[]> {
    return this.rows<AttemptRow>(
      `SELECT id, endpoint_id, attempt, status, error_class, error, response_excerpt,
              to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS started_at,
              to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS finished_at,
              (extract(epoch FROM finished_at - created_at) * 1000)::int AS duration_ms
         FROM webhook_deliveries WHERE client_id = $1 AND event_id = $2
        ORDER BY created_at DESC, id DESC LIMIT $3`,
      [clientId, eventId, limit],
    );
  }
}
