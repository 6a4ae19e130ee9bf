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

/** A failed attempt's retry: the schedule (seconds from the first attempt) and the receiver's Retry-After, if any. */
export interface RetryRule {
  offsetsS: readonly number[];
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

/**
 * Each attempt to deliver an event to an endpoint, written outside any
 * transaction by the relay: started before the request is sent (begin),
 * finished with its outcome, so an attempt cut short (a process killed) keeps its row. The
 * attempts of one outbox message (`message_id`) are its place in the retry
 * schedule: a failed one holds the time of the next (`retry_at`).
 */
@Injectable()
export class WebhookDeliveriesRepository extends SqlRepository {
  /**
   * Where the message stands (Begun), its endpoint admitted (admissionCtes:
   * a probe taken only when due), and, due and admitted, its attempt started
   * (its number, the attempts so far plus one), in one statement. The turn
   * is the latest attempt's retry_at (none while unfinished: due).
   */
  async begin(d: Delivery, probeLeaseS: number, overlap: string): Promise<Begun> {
    const [row] = await this.rows<Begun>(
      `WITH turn AS (
         SELECT count(*)::int AS made,
                coalesce((array_agg(retry_at IS NULL OR retry_at <= now() ORDER BY created_at DESC, id DESC))[1], true) AS due,
                coalesce((array_agg(retry_at = 'infinity' ORDER BY created_at DESC, id DESC))[1], false) AS over,
                (array_agg(${MS_UNTIL('retry_at')} ORDER BY created_at DESC, id DESC))[1] AS wait_ms
           FROM webhook_deliveries WHERE client_id = $1 AND message_id = $4),
       ${admissionCtes({ client: '$1', id: '$3', lease: '$5', overlap: '$6', gate: '(SELECT due AND NOT over FROM turn)' })},
       started AS (
         INSERT INTO webhook_deliveries (client_id, event_id, endpoint_id, message_id, attempt)
         SELECT $1, $2, $3, $4, turn.made + 1 FROM turn, admission WHERE turn.due AND NOT turn.over AND admission.admitted
         RETURNING id)
       SELECT turn.*, admission.*, (SELECT id FROM started) AS attempt_id FROM turn LEFT JOIN admission ON true`,
      [d.clientId, d.eventId, d.endpointId, d.messageId, probeLeaseS, overlap],
    );
    return row;
  }

  /**
   * The attempt's outcome; a failed one (`retry` given) also gets its
   * message's next time, on the database's clock: the first step of the
   * schedule (counted from the message's first attempt) still ahead and not
   * before the Retry-After; a Retry-After past the last step, the last step
   * still ahead; none left, 'infinity'. A succeeded one clears its endpoint's
   * failures in the same statement (succeededCte). Answers the ms until that
   * next time (undefined: succeeded, or none left).
   */
  async finish(clientId: string, endpointId: string, id: string, o: AttemptOutcome, retry?: RetryRule): Promise<number | undefined> {
    const [row] = await this.rows<{ wait_ms: number | null }>(
      `WITH first AS (
         SELECT min(created_at) AS at FROM webhook_deliveries
          WHERE client_id = $1 AND message_id = (SELECT message_id FROM webhook_deliveries WHERE client_id = $1 AND id = $2)),
       steps AS (SELECT first.at + o * interval '1 second' AS at FROM first, unnest($8::int[]) o WHERE first.at + o * interval '1 second' > now()),
       asked AS (SELECT coalesce(now() + $9::int8 * interval '1 second', $10::timestamptz) AS at),
       ${succeededCte({ client: '$1', id: '$11', gate: 'NOT $7::boolean' })}
       UPDATE webhook_deliveries SET status = $3, response_excerpt = $4, error_class = $5, error = $6, finished_at = now(),
              retry_at = CASE WHEN $7::boolean THEN coalesce(
                (SELECT min(steps.at) FROM steps, asked WHERE asked.at IS NULL OR steps.at >= asked.at),
                (SELECT max(at) FROM steps),
                'infinity') END
        WHERE client_id = $1 AND id = $2
       RETURNING ${MS_UNTIL('retry_at')} AS wait_ms`,
      [clientId, id, o.status, storable(o.excerpt), o.errorClass, storable(o.error), retry !== undefined, retry?.offsetsS ?? [], retry?.afterSeconds ?? null, retry?.afterAt ?? null, endpointId],
    );
    return row?.wait_ms ?? undefined;
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
