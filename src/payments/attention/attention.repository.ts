import { Injectable } from '@nestjs/common';
import { SqlRepository } from '../../database/sql-repository';

/** What was handed to a person: a payment or a refund. */
export type AttentionOperation = 'payment' | 'refund';
/**
 * What an operator asks for: mark the operation failed, or have the card
 * network asked again; a contradiction (which belongs to no operation) is
 * acknowledged once an operator has dealt with it.
 */
export type AttentionDecision = 'fail' | 'reask' | 'acknowledge';
/** Why an operation was handed over (see OperationAttention), or `contradicted`: the network's event contradicts a final record. */
export type AttentionReason = 'refused' | 'stuck' | 'contradicted';

/** A hand-over as the operator surface shows it; times are text (the database's, never sent back as bounds). */
export interface AttentionRow {
  client_id: string;
  id: string;
  operation: AttentionOperation;
  record_id: string;
  /** The operation's key; null for a contradiction, which belongs to no operation. */
  idempotency_key: string | null;
  reason: AttentionReason;
  evidence: string;
  created_at: string;
  decision: AttentionDecision | null;
  decision_reason: string | null;
  decided_by: string | null;
  decided_at: string | null;
  /** Why the decision is not applied yet: the card network could not be asked about the operation's object. */
  waiting: string | null;
  resolution: string | null;
  resolved_at: string | null;
}

const COLUMNS = `client_id, id, operation, record_id, idempotency_key, reason, evidence, created_at::text AS created_at,
  decision, decision_reason, decided_by, decided_at::text AS decided_at, waiting, resolution, resolved_at::text AS resolved_at`;

/** The SQL of operation_attention (one row per hand-over, kept as the audit) and of the stuck bound. */
@Injectable()
export class AttentionRepository extends SqlRepository {
  async open(clientId: string, a: { operation: AttentionOperation; recordId: string; key: string; reason: AttentionReason; evidence: string }): Promise<AttentionRow> {
    const [row] = await this.rows<AttentionRow>(
      `INSERT INTO operation_attention (client_id, operation, record_id, idempotency_key, reason, evidence)
       VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${COLUMNS}`,
      [clientId, a.operation, a.recordId, a.key, a.reason, a.evidence],
    );
    return row;
  }

  async find(clientId: string, id: string): Promise<AttentionRow | undefined> {
    const [row] = await this.rows<AttentionRow>(`SELECT ${COLUMNS} FROM operation_attention WHERE client_id = $1 AND id = $2`, [clientId, id]);
    return row;
  }

  /** The open hand-over of the operation under the client's `key`, if it has one (a contradiction belongs to no operation). */
  async openForKey(clientId: string, key: string): Promise<AttentionRow | undefined> {
    const [row] = await this.rows<AttentionRow>(
      `SELECT ${COLUMNS} FROM operation_attention
        WHERE client_id = $1 AND idempotency_key = $2 AND resolved_at IS NULL AND reason <> 'contradicted'`,
      [clientId, key],
    );
    return row;
  }

  /** The operator's look-up by the id alone (the surface spans clients). */
  async findById(id: string): Promise<AttentionRow | undefined> {
    const [row] = await this.rows<AttentionRow>(`SELECT ${COLUMNS} FROM operation_attention WHERE id = $1`, [id]);
    return row;
  }

  /**
   * A contradiction of the record by the network's event: opened unless one is
   * already open for the record (a repeat or another event about it), and only
   * for a client that exists (the event's metadata names it).
   */
  async openContradiction(clientId: string, a: { operation: AttentionOperation; recordId: string; key: string | null; evidence: string }): Promise<AttentionRow | undefined> {
    const [row] = await this.rows<AttentionRow>(
      `INSERT INTO operation_attention (client_id, operation, record_id, idempotency_key, reason, evidence)
       SELECT id, $2, $3, $4, 'contradicted', $5 FROM clients WHERE id = $1
       ON CONFLICT (client_id, operation, record_id) WHERE resolved_at IS NULL DO NOTHING
       RETURNING ${COLUMNS}`,
      [clientId, a.operation, a.recordId, a.key, a.evidence],
    );
    return row;
  }

  /** Why the decision on an open hand-over is not applied yet (kept until it is). */
  async wait(clientId: string, id: string, why: string): Promise<void> {
    await this.rows(`UPDATE operation_attention SET waiting = $3 WHERE client_id = $1 AND id = $2 AND resolved_at IS NULL`, [clientId, id, why]);
  }

  /** Ends a hand-over, once, in the transaction that ends or reopens its operation. */
  async resolve(clientId: string, id: string, resolution: string): Promise<boolean> {
    const rows = await this.rows(
      `UPDATE operation_attention SET resolution = $3, resolved_at = now(), waiting = NULL
        WHERE client_id = $1 AND id = $2 AND resolved_at IS NULL RETURNING id`,
      [clientId, id, resolution],
    );
    return rows.length === 1;
  }

  /**
   * An operator's decision, once per hand-over: a second one (or one after the
   * end) changes nothing. A contradiction takes only `acknowledge`, which ends
   * it at once (there is no operation to apply it); an operation's hand-over
   * takes `fail` or `reask`, applied by its next attempt.
   */
  async decide(id: string, decision: AttentionDecision, by: string, reason: string | null): Promise<AttentionRow | undefined> {
    const [row] = await this.rows<AttentionRow>(
      `UPDATE operation_attention SET decision = $2, decided_by = $3, decision_reason = $4, decided_at = now(),
              resolution = CASE WHEN $2 = 'acknowledge' THEN 'acknowledged' END,
              resolved_at = CASE WHEN $2 = 'acknowledge' THEN now() END
        WHERE id = $1 AND resolved_at IS NULL AND decision IS NULL AND (reason = 'contradicted') = ($2 = 'acknowledge')
        RETURNING ${COLUMNS}`,
      [id, decision, by, reason],
    );
    return row;
  }

  /** Open hand-overs, oldest first, after the one `after` (its id) when given. */
  listOpen(limit: number, after?: { clientId: string; id: string }): Promise<AttentionRow[]> {
    return this.rows<AttentionRow>(
      `SELECT ${COLUMNS} FROM operation_attention a
        WHERE resolved_at IS NULL
          AND ($2::uuid IS NULL OR (a.created_at, a.client_id, a.id) >
               (SELECT b.created_at, b.client_id, b.id FROM operation_attention b WHERE b.client_id = $2 AND b.id = $3))
        ORDER BY a.created_at, a.client_id, a.id LIMIT $1`,
      [limit, after?.clientId ?? null, after?.id ?? null],
    );
  }

  async countOpen(): Promise<{ operation: AttentionOperation; n: number }[]> {
    return this.rows(`SELECT operation, count(*)::int AS n FROM operation_attention WHERE resolved_at IS NULL GROUP BY operation`, []);
  }

  /**
   * Whether the record's retries have run for more than `boundMs` on the
   * database's clock: from its creation, or from when a person last gave it
   * back (`reask`, or the network found it), so that a reopened operation gets
   * the whole bound again.
   */
  async pastBound(operation: AttentionOperation, clientId: string, recordId: string, boundMs: number): Promise<boolean> {
    const table = operation === 'payment' ? 'payments' : 'refunds';
    const [row] = await this.rows<{ past: boolean }>(
      `SELECT GREATEST(r.created_at,
                (SELECT max(a.resolved_at) FROM operation_attention a WHERE a.client_id = $1 AND a.operation = $4 AND a.record_id = $2))
              < now() - $3::int8 * interval '1 millisecond' AS past
         FROM ${table} r WHERE r.client_id = $1 AND r.id = $2`,
      [clientId, recordId, boundMs, operation],
    );
    return row?.past === true;
  }
}
