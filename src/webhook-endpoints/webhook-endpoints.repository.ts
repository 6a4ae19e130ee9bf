import { Injectable } from '@nestjs/common';
import { SqlRepository } from '../database/sql-repository';

export interface WebhookEndpointRow {
  id: string;
  url: string;
  event_types: string[];
  secret: string;
  /** Which secret is in force: 1 at registration, one more at each rotation that makes a new one. */
  secret_version: number;
  created_at: Date;
  failing_since: Date | null;
  disabled_at: Date | null;
  disabled_reason: string | null;
}

const COLUMNS = 'id, url, event_types, secret, secret_version, created_at, failing_since, disabled_at, disabled_reason';

/** An endpoint's secrets as stored (sealed, or in clear without a key ring). */
export interface StoredSecrets {
  client_id: string;
  id: string;
  secret: string;
  previous_secret: string | null;
}

/** Whether a delivery may go to the endpoint now (admissionCtes): open, its probe, held (paused or disabled). */
export interface AdmissionRow {
  url: string;
  secret: string;
  /** The secret the last rotation replaced, while it still signs (within the overlap); null after. */
  previous_secret: string | null;
  disabled: boolean;
  admitted: boolean;
  /** Held while paused: the ms until its next probe may go (the pause's end, or the end of the probe another delivery holds). */
  probe_in_ms: number | null;
}

/** A failed attempt, as the endpoint's health counts it (see endpoint-pacing.ts). */
export interface EndpointFailure {
  /** The endpoint answered 410 Gone: disabled at once, with this reason. */
  goneReason: string | null;
  /** A Retry-After: seconds from now, or the time it names. */
  retryAfterSeconds: number | null;
  retryAfterAt: string | null;
}

/** The endpoint's pacing (endpoint-pacing.ts). */
export interface EndpointPacing {
  failuresBeforePause: number;
  pauseFirstS: number;
  pauseMaxS: number;
  disableAfter: string;
}

/**
 * Three CTEs of the statement that starts deliveries' attempts
 * (WebhookDeliveriesRepository.begin), for the rows of CTE `deliveries`
 * (columns `n`, `client_id`, `endpoint_id`, and `wants`: the delivery is due):
 * `admission`, per delivery `n` whose endpoint exists, whether it may go now
 * (an AdmissionRow), and `asking` and `probe`, which it reads. When an endpoint
 * is paused (next_probe_at set), only the one delivery that moves
 * next_probe_at past now() by the probe's lease (`lease` s; a compare-and-set:
 * one winner among relays, and among a statement's deliveries the first that
 * wants it) is admitted, as its probe. A delivery held by the pause learns
 * when the next probe may go: the pause's end, or, the probe taken by another
 * delivery (next_probe_at as this statement read it has passed), that
 * probe's lease's end. The arguments are SQL (parameters); `overlap` is the
 * rotation's overlap, an interval.
 */
export function admissionCtes(p: { deliveries: string; lease: string; overlap: string }): string {
  return `asking AS (
         SELECT DISTINCT ON (client_id, endpoint_id) n, client_id, endpoint_id FROM ${p.deliveries} WHERE wants ORDER BY client_id, endpoint_id, n),
       probe AS (
         UPDATE webhook_endpoints e SET next_probe_at = now() + ${p.lease}::int * interval '1 second'
           FROM asking a
          WHERE e.client_id = a.client_id AND e.id = a.endpoint_id AND e.disabled_at IS NULL AND e.next_probe_at <= now()
         RETURNING a.n),
       admission AS (
         SELECT d.n, e.url, e.secret, CASE WHEN e.rotated_at > now() - ${p.overlap}::interval THEN e.previous_secret END AS previous_secret,
                e.disabled_at IS NOT NULL AS disabled,
                e.disabled_at IS NULL AND (e.next_probe_at IS NULL OR probe.n IS NOT NULL) AS admitted,
                CASE WHEN e.disabled_at IS NULL AND e.next_probe_at IS NOT NULL AND probe.n IS NULL THEN
                  ceil(extract(epoch FROM CASE WHEN e.next_probe_at > now() THEN e.next_probe_at - now() ELSE ${p.lease}::int * interval '1 second' END) * 1000)::float8
                END AS probe_in_ms
           FROM ${p.deliveries} d
           JOIN webhook_endpoints e ON e.client_id = d.client_id AND e.id = d.endpoint_id
           LEFT JOIN probe ON probe.n = d.n)`;
}

/**
 * A CTE `healthy` of the statement that finishes deliveries' attempts
 * (WebhookDeliveriesRepository.finish): a 2xx from an endpoint ends its
 * failures in a row and its pause (written only when there is something to
 * clear). `succeeded` is SQL: a query of the (client_id, endpoint_id) that
 * answered 2xx.
 */
export function succeededCte(p: { succeeded: string }): string {
  return `healthy AS (
         UPDATE webhook_endpoints e SET failures = 0, failing_since = NULL, next_probe_at = NULL
           FROM (SELECT DISTINCT client_id, endpoint_id FROM (${p.succeeded}) s) ok
          WHERE e.client_id = ok.client_id AND e.id = ok.endpoint_id AND (e.failures > 0 OR e.next_probe_at IS NOT NULL))`;
}

/** All SQL of webhook endpoints; every statement filters by client_id. */
@Injectable()
export class WebhookEndpointsRepository extends SqlRepository {
  async insert(clientId: string, id: string, url: string, eventTypes: string[], sealedSecret: string): Promise<WebhookEndpointRow> {
    const [row] = await this.rows<WebhookEndpointRow>(
      `INSERT INTO webhook_endpoints (client_id, id, url, event_types, secret) VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}`,
      [clientId, id, url, eventTypes, sealedSecret],
    );
    return row;
  }

  /** The client's endpoints, counted with the client's row locked (to the end of the transaction). */
  async countLocked(clientId: string): Promise<number> {
    await this.rows(`SELECT 1 FROM clients WHERE id = $1 FOR UPDATE`, [clientId]);
    const [{ n }] = await this.rows<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_endpoints WHERE client_id = $1`, [clientId]);
    return n;
  }

  list(clientId: string): Promise<WebhookEndpointRow[]> {
    return this.rows<WebhookEndpointRow>(`SELECT ${COLUMNS} FROM webhook_endpoints WHERE client_id = $1 ORDER BY created_at DESC, id DESC`, [clientId]);
  }

  async find(clientId: string, id: string): Promise<WebhookEndpointRow | undefined> {
    const [row] = await this.rows<WebhookEndpointRow>(`SELECT ${COLUMNS} FROM webhook_endpoints WHERE client_id = $1 AND id = $2`, [clientId, id]);
    return row;
  }

  /**
   * A failed attempt: counted; past `failuresBeforePause` in a row the
   * endpoint pauses (1 min, doubling, at most `pauseMaxS`), and a Retry-After
   * pauses it until then (at most `pauseMaxS` ahead); a 410, or failing since
   * `disableAfter` ago, disables it. Answers the endpoint when this attempt
   * disabled it.
   */
  async failed(clientId: string, id: string, f: EndpointFailure, p: EndpointPacing): Promise<WebhookEndpointRow | undefined> {
    const [row] = await this.rows<WebhookEndpointRow & { disabled: boolean }>(
      `UPDATE webhook_endpoints SET
         failures = failures + 1,
         failing_since = coalesce(failing_since, now()),
         next_probe_at = CASE WHEN failures + 1 >= $6 OR $4::int8 IS NOT NULL OR $5::timestamptz IS NOT NULL THEN greatest(
             CASE WHEN failures + 1 >= $6 THEN now() + least($8, $7 * power(2, least(failures + 1 - $6, 20))) * interval '1 second' END,
             least(coalesce(now() + $4::int8 * interval '1 second', $5::timestamptz), now() + $8 * interval '1 second'),
             now()) END,
         disabled_at = CASE WHEN $3::text IS NOT NULL OR failing_since <= now() - $9::interval THEN now() END,
         disabled_reason = CASE
           WHEN $3::text IS NOT NULL THEN $3::text
           WHEN failing_since <= now() - $9::interval THEN
             'every delivery failed since ' || to_char(failing_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ' (' || $9::text || ')'
         END
       WHERE client_id = $1 AND id = $2 AND disabled_at IS NULL
       RETURNING ${COLUMNS}, disabled_at IS NOT NULL AS disabled`,
      [clientId, id, f.goneReason, f.retryAfterSeconds, f.retryAfterAt, p.failuresBeforePause, p.pauseFirstS, p.pauseMaxS, p.disableAfter],
    );
    return row?.disabled ? row : undefined;
  }

  /** Enabled again, its failures forgotten: its held deliveries go at their next turn. */
  async enable(clientId: string, id: string): Promise<WebhookEndpointRow | undefined> {
    const [row] = await this.rows<WebhookEndpointRow>(
      `UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL, failures = 0, failing_since = NULL, next_probe_at = NULL
        WHERE client_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
      [clientId, id],
    );
    return row;
  }

  // The secrets at rest (SecretsAtRest) are read and resealed at boot, every client's: sent
  // unnamed, as migrations are, so that a pooler that cannot keep prepared statements never
  // stops a boot by chance (the request path names its statements, see SqlRepository).

  /**
   * How many secrets each key seals (null: in clear), the current ones and the
   * previous ones alike. The key id is the third field of `sealed:v1:<key id>:…`
   * (EndpointSecrets).
   */
  sealedBy(): Promise<{ key_id: string | null; n: number }[]> {
    return this.txHost.tx.query(
      `SELECT CASE WHEN s LIKE 'sealed:v1:%' THEN split_part(s, ':', 3) END AS key_id, count(*)::int AS n
         FROM webhook_endpoints CROSS JOIN LATERAL (VALUES (secret), (previous_secret)) AS both_secrets (s)
        WHERE s IS NOT NULL GROUP BY 1`,
    );
  }

  /** Up to `limit` endpoints with a secret (current or previous) not sealed under `keyId` (in clear, or under another key). */
  notSealedUnder(keyId: string, limit: number): Promise<StoredSecrets[]> {
    return this.txHost.tx.query(
      `SELECT client_id, id, secret, previous_secret FROM webhook_endpoints
        WHERE secret NOT LIKE 'sealed:v1:' || $1 || ':%' OR previous_secret NOT LIKE 'sealed:v1:' || $1 || ':%'
        ORDER BY client_id, id LIMIT $2`,
      [keyId, limit],
    );
  }

  /** Both secrets replaced only if they are still what was read (another instance may have sealed them first, or a rotation replaced them). */
  async resealed(was: StoredSecrets, sealed: { secret: string; previous_secret: string | null }): Promise<boolean> {
    const rows = (await this.txHost.tx.query(
      `WITH replaced AS (
         UPDATE webhook_endpoints SET secret = $5, previous_secret = $6
          WHERE client_id = $1 AND id = $2 AND secret = $3 AND previous_secret IS NOT DISTINCT FROM $4
         RETURNING id)
       SELECT id FROM replaced`,
      [was.client_id, was.id, was.secret, was.previous_secret, sealed.secret, sealed.previous_secret],
    )) as unknown[];
    return rows.length === 1;
  }

  async delete(clientId: string, id: string): Promise<boolean> {
    return (await this.rows(`DELETE FROM webhook_endpoints WHERE client_id = $1 AND id = $2 RETURNING id`, [clientId, id])).length > 0;
  }

  /** The new secret in force (its version one more); the one it replaces kept as the previous one, from now() (whatever was previous before is dropped). */
  async replaceSecret(clientId: string, id: string, sealedSecret: string): Promise<WebhookEndpointRow | undefined> {
    const [row] = await this.rows<WebhookEndpointRow>(
      `UPDATE webhook_endpoints SET previous_secret = secret, rotated_at = now(), secret = $3, secret_version = secret_version + 1
        WHERE client_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
      [clientId, id, sealedSecret],
    );
    return row;
  }

  /** The previous secret dropped: from now on only the current one signs. */
  async expirePrevious(clientId: string, id: string): Promise<WebhookEndpointRow | undefined> {
    const [row] = await this.rows<WebhookEndpointRow>(
      `UPDATE webhook_endpoints SET previous_secret = NULL, rotated_at = NULL
        WHERE client_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
      [clientId, id],
    );
    return row;
  }
}
