import { Injectable } from '@nestjs/common';
import { SqlRepository } from '../database/sql-repository';

/** What was handed to a person: a payment or a refund. */
export type AttentionOperation = 'payment' | 'refund';
/** What an operator asks for: mark the operation failed, or have the card network asked again. */
export type AttentionDecision = 'fail' | 'reask';

/** A hand-over as the operator surface shows it; times are text (the database's, never sent back as bounds). */
export interface AttentionRow {
  client_id: string;
  id: string;
  operation: AttentionOperation;
  record_id: string;
  idempotency_key: string;
  reason: string;
  evidence: string;
  created_at: string;
  decision: AttentionDecision | null;
  decision_reason: string | null;
  decided_by: string | null;
  decided_at: string | null;
  resolution: string | null;
  resolved_at: string | null;
}

const COLUMNS = `client_id, id, operation, record_id, idempotency_key, reason, evidence, created_at::text AS created_at,
  decision, decision_reason, decided_by, decided_at::text AS decided_at, resolution, resolved_at::text AS resolved_at`;

/** The SQL of operation_attention (one row per hand-over, kept as the audit) and of the stuck bound. */
@Injectable()
export class AttentionRepository extends SqlRepository {
  async open(clientId: string, a: { operation: AttentionOperation; recordId: string; key: string; reason: string; evidence: string }): Promise<AttentionRow> {
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

  /** The operator's look-up by the id alone (the surface spans clients). */
  async findById(id: string): Promise<AttentionRow | undefined> {
    const [row] = await this.rows<AttentionRow>(`SELECT ${COLUMNS} FROM operation_attention WHERE id = $1`, [id]);
    return row;
  }

  /** Ends a hand-over, once, in the transaction that ends or reopens its operation. */
  async resolve(clientId: string, id: string, resolution: string): Promise<boolean> {
    const rows = await this.rows(
      `UPDATE operation_attention SET resolution = $3, resolved_at = now()
        WHERE client_id = $1 AND id = $2 AND resolved_at IS NULL RETURNING id`,
      [clientId, id, resolution],
    );
    return rows.length === 1;
  }

  /** An operator's decision, once per hand-over: a second one (or one after the end) changes nothing. */
  async decide(id: string, decision: AttentionDecision, by: string, reason: string | null): Promise<AttentionRow | undefined> {
    const [row] = await this.rows<AttentionRow>(
      `UPDATE operation_attention SET decision = $2, decided_by = $3, decision_reason = $4, decided_at = now()
        WHERE id = $1 AND resolved_at IS NULL AND decision IS NULL RETURNING ${COLUMNS}`,
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

  /** Whether the record was created more than `boundMs` ago, on the database's clock. */
  async pastBound(operation: AttentionOperation, clientId: string, recordId: string, boundMs: number): Promise<boolean> {
    const sql =
      operation === 'payment'
        ? `SELECT created_at < now() - $3::int8 * interval '1 millisecond' AS past FROM payments WHERE client_id = $1 AND id = $2`
        : `SELECT created_at < now() - $3::int8 * interval '1 millisecond' AS past FROM refunds WHERE client_id = $1 AND id = $2`;
    const [row] = await this.rows<{ past: boolean }>(sql, [clientId, recordId, boundMs]);
    return row?.past === true;
  }
}
