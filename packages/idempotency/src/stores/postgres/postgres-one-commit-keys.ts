import { ClaimRequest, ClaimResult, OneCommitKeys, StoredResponse } from '../../contract/idempotency.store';
import { ResponseCipher } from '../../contract/response-cipher';
import { KeyQueries } from './key-queries';
import { KEY_ALREADY_WRITTEN, OneCommitStatements } from './one-commit-statements';

interface OneCommitClaimRow {
  /** Null when the lock was not tried (the row is final or another's); absent on the read under the lock. */
  locked?: boolean | null;
  found: boolean;
  same: boolean | null;
  status: number | null;
  body: string | null;
  headers: string | null;
  expired: boolean | null;
  abandoned: boolean | null;
  remaining_us: string | null;
  retained_ms: string | null;
}

/** Another unit holds the key's lock: its owner is at work (how long it may take is the lease). */
const HELD_RETRY_MS = 1_000;

/**
 * Keys claimed by the transaction that runs their request (see
 * one-commit-statements.ts). The claim is a transaction-scoped advisory lock,
 * tried (never waited for: a duplicate learns at once that the key is taken),
 * so a crash, a rollback or a connection the server ends frees the key at once.
 * The same statement bounds the transaction by the lease (statement,
 * idle-in-transaction and, from PostgreSQL 17, transaction timeouts, local to
 * it): a handler that hangs past the lease has its transaction ended by the
 * server, so it can never commit. The key's row is inserted with the response
 * just before COMMIT; its primary key fences two units that both believed the
 * key free. A claim that takes the lock reads the row once more under it, so
 * a unit that committed the key just before is replayed, never run again.
 * Responses are sealed at rest like the durable claim's.
 */
export class PostgresOneCommitKeys implements OneCommitKeys {
  constructor(
    private readonly queries: KeyQueries,
    private readonly sql: OneCommitStatements,
    private readonly cipher: ResponseCipher,
  ) {}

  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const { scope, key, id, fingerprint, leaseMs, retentionMs } = request;
    // Locked: what a unit committed before letting the lock go is read under the lock, before the handler runs.
    const [[first], read] = await this.queries.inTransactionThen<OneCommitClaimRow, OneCommitClaimRow>(
      { name: 'idempotency_one_commit_claim', text: this.sql.claim, values: [id, fingerprint, String(leaseMs)] },
      { name: 'idempotency_one_commit_read', text: this.sql.read, values: [id, fingerprint] },
      ([claim]) => claim.locked === true,
    );
    // Tried only for a key left to be claimed (see the statement): held by another unit, it is in progress.
    if (first.locked === false) return { kind: 'in_progress', retryAfterMs: HELD_RETRY_MS };
    const row = read ? read[0] : first;
    // Its final write is then a plain INSERT (the primary key its fence).
    const unit = this.queries.currentUnit();
    if (unit) unit.unseenKey = row.found ? undefined : id;
    const claimed = (takenOver: boolean): ClaimResult => ({
      kind: 'claimed',
      // No token: the claim is the transaction's lock, and nothing outside it can be fenced.
      owner: { scope, key, id, token: '', retentionMs },
      takenOver,
      recovery: null,
      retainedForMs: retentionMs,
    });
    if (!row.found || row.expired) return claimed(false);
    if (!row.same) return { kind: 'mismatch' };
    if (row.status !== null) {
      return { kind: 'completed', response: this.cipher.open(id, row.status, row.body ?? '', row.headers, key), retainedForMs: Number(row.retained_ms) };
    }
    // A durable claim's row: its owner is at work, or has left it to be taken over.
    if (row.abandoned) return claimed(true);
    return { kind: 'in_progress', retryAfterMs: Math.max(HELD_RETRY_MS, Number(row.remaining_us) / 1000) };
  }

  async complete(request: ClaimRequest, response: StoredResponse): Promise<void> {
    const sealed = this.cipher.seal(request.id, response);
    const values = [request.id, request.fingerprint, response.status, sealed.body, sealed.headers, request.retentionMs];
    // No row written (LeaseLostError): a durable claim of the same key committed its row after our read.
    if (this.queries.currentUnit()?.unseenKey === request.id) {
      await this.queries.lastInTransaction({ name: 'idempotency_one_commit_insert', text: this.sql.insert, values }, KEY_ALREADY_WRITTEN);
    } else {
      await this.queries.fencedInTransaction('idempotency_one_commit_complete', this.sql.complete, values);
    }
  }
}
