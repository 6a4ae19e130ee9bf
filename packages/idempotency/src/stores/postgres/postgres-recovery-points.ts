import { Ownership, RecoveryPoint, RecoveryPoints, ScopedKey } from '../../contract/idempotency.store';
import { KeyQueries } from './key-queries';
import { FENCED_WRITE_REFUSED, KeyStatements } from './statements';

/**
 * A recovery point as stored: with the scope and key it belongs to, which the
 * row itself does not keep (see keyId), and the route's retention, so that the
 * recovery job can hand the operation its owner again. Cleared with the rest by
 * the completion.
 */
export interface StoredRecoveryPoint extends RecoveryPoint {
  scope: string;
  key: string;
  retentionMs?: number;
}

interface TakenRow {
  /** The key's id: the recovery point names its scope and key, the row its id. */
  id: string;
  lease: string;
  recovery: StoredRecoveryPoint;
}

/**
 * Recovery points in the keys table (the `recovery` column): each phase's point
 * commits, fenced, in the phase's own transaction, as its last write (sent with
 * its COMMIT on a pipelined client); takeovers are the lease's compare-and-set,
 * one winner per key.
 */
export class PostgresRecoveryPoints implements RecoveryPoints {
  constructor(
    private readonly queries: KeyQueries,
    private readonly sql: KeyStatements,
    /** The retention of an operation whose recovery point does not name one. */
    private readonly defaultRetentionMs: number,
  ) {}

  async checkpoint(owner: Ownership, recovery: RecoveryPoint): Promise<void> {
    const stored: StoredRecoveryPoint = { ...recovery, scope: owner.scope, key: owner.key, retentionMs: owner.retentionMs };
    const values = [owner.id, owner.token, JSON.stringify(stored)];
    await this.queries.lastInTransaction({ name: 'idempotency_checkpoint', text: this.sql.checkpoint, values }, FENCED_WRITE_REFUSED);
  }

  async discard(owner: Ownership): Promise<void> {
    await this.queries.fencedInTransaction('idempotency_discard', this.sql.discard, [owner.id, owner.token]);
  }

  async takeOver(leaseMs: number, at?: ScopedKey): Promise<{ owner: Ownership; recovery: RecoveryPoint } | null> {
    const [row] = at
      ? await this.queries.autocommit<TakenRow>('idempotency_take_over_operation', this.sql.takeOverOperation, [at.id, leaseMs])
      : await this.queries.autocommit<TakenRow>('idempotency_take_over_abandoned', this.sql.takeOverAbandoned, [leaseMs]);
    return row ? this.ownerOf(row.id, row.lease, row.recovery) : null;
  }

  /** A stored recovery point of the key `id` parted into the owner it belongs to (with the new token) and the point itself. */
  ownerOf(id: string, token: string, stored: StoredRecoveryPoint): { owner: Ownership; recovery: RecoveryPoint } {
    const { scope, key, retentionMs, ...recovery } = stored;
    return { owner: { scope, key, id, token, retentionMs: retentionMs ?? this.defaultRetentionMs }, recovery };
  }
}
