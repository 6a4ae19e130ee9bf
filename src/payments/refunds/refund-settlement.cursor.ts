import { Injectable } from '@nestjs/common';
import { SqlRepository } from '../../database/sql-repository';
import type { RefundCursor } from '../model/payments.repository';

/** The settlement job's two walks: pending refunds, and succeeded ones that may still fail. */
export type SettlementWalk = 'pending' | 'succeeded';

/** Where each walk stands (null: at the oldest). */
export type WalkCursors = Record<SettlementWalk, RefundCursor | null>;

interface CursorRow {
  pending_at: string | null;
  pending_client_id: string | null;
  pending_id: string | null;
  succeeded_at: string | null;
  succeeded_client_id: string | null;
  succeeded_id: string | null;
}

const LEASE = `now() + $2::int8 * interval '1 millisecond'`;

// Free, expired, or already ours: one statement, so two instances claiming at
// once are decided by the row lock (the second re-reads the row and finds it held).
const CLAIM = `
UPDATE refund_settlement_cursor SET holder = $1, lease_until = ${LEASE}
 WHERE id AND (holder = $1 OR holder IS NULL OR lease_until <= now())
RETURNING pending_at::text AS pending_at, pending_client_id, pending_id,
          succeeded_at::text AS succeeded_at, succeeded_client_id, succeeded_id`;

// The cursor's created_at comes back as the text it was read as (created_at::text) and is
// cast in SQL: exact to the microsecond, never through a JS Date.
const ADVANCE = (walk: SettlementWalk) => `
UPDATE refund_settlement_cursor
   SET ${walk}_at = $3::timestamptz, ${walk}_client_id = $4::uuid, ${walk}_id = $5::uuid, lease_until = ${LEASE}
 WHERE id AND holder = $1 AND lease_until > now()
RETURNING holder`;
const ADVANCE_PENDING = ADVANCE('pending');
const ADVANCE_SUCCEEDED = ADVANCE('succeeded');

const RELEASE = `UPDATE refund_settlement_cursor SET holder = NULL, lease_until = NULL WHERE id AND holder = $1`;

function cursor(at: string | null, clientId: string | null, id: string | null): RefundCursor | null {
  return at === null || clientId === null || id === null ? null : { at, client_id: clientId, id };
}

/**
 * The one cursor of the refund settlement job for the whole fleet (the single
 * row of refund_settlement_cursor) and the lease on it. Every statement is one
 * autocommit UPDATE judged on the database's clock; the walk's network calls
 * run between them with nothing held but the lease.
 */
@Injectable()
export class RefundSettlementCursors extends SqlRepository {
  /**
   * Takes the lease for `holder` for `leaseMs` (or renews it, when it is
   * already `holder`'s): the walks' cursors, or undefined while another
   * instance holds an unexpired lease.
   */
  async claim(holder: string, leaseMs: number): Promise<WalkCursors | undefined> {
    const [row] = await this.rows<CursorRow>(CLAIM, [holder, leaseMs]);
    if (!row) return undefined;
    return {
      pending: cursor(row.pending_at, row.pending_client_id, row.pending_id),
      succeeded: cursor(row.succeeded_at, row.succeeded_client_id, row.succeeded_id),
    };
  }

  /**
   * Moves a walk's cursor to `to` (null: back to the oldest) and renews the
   * lease, only while `holder` still holds it: false when the lease was lost
   * (it expired and another instance took it), and nothing was written.
   */
  async advance(holder: string, leaseMs: number, walk: SettlementWalk, to: RefundCursor | null): Promise<boolean> {
    const rows = await this.rows(walk === 'pending' ? ADVANCE_PENDING : ADVANCE_SUCCEEDED, [holder, leaseMs, to?.at ?? null, to?.client_id ?? null, to?.id ?? null]);
    return rows.length === 1;
  }

  /** Gives the lease up, if `holder` still has it: another instance continues from the cursor at its next tick. */
  async release(holder: string): Promise<void> {
    await this.rows(RELEASE, [holder]);
  }
}
