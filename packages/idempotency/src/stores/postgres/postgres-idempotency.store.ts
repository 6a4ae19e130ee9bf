import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { IDEMPOTENCY_OPTIONS, IDEMPOTENCY_TX_HOST, ResolvedIdempotencyOptions } from '../../config/idempotency.options';
import { KeyTransactionWrites } from '../../core/key-transaction-writes';
import { ResponseCipher } from '../../contract/response-cipher';
import { ClaimRequest, ClaimResult, IdempotencyStore, KeyOutcome, KeySettlement, OneCommitKeys, Ownership, RecoveryPoints, ScopedKey, StoredResponse } from '../../contract/idempotency.store';
import { createClaimPool } from './claim-pool';
import { KeyQueries } from './key-queries';
import { oneCommitStatements } from './one-commit-statements';
import { PostgresOneCommitKeys } from './postgres-one-commit-keys';
import { PostgresRecoveryPoints, StoredRecoveryPoint } from './postgres-recovery-points';
import { SettledKeysListener } from './settled-keys';
import { FENCED_WRITE_REFUSED, KeyStatements, keyStatements } from './statements';

/**
 * The claim/complete protocol in PostgreSQL (see docs/idempotency.md).
 *
 * - Claim-or-get is ONE autocommit statement (prepared): a read of the existing
 *   row, and INSERT ... ON CONFLICT DO NOTHING only when there is none. Nothing
 *   locks an existing row, so a duplicate never queues behind the request that
 *   owns the key (ON CONFLICT DO UPDATE would lock it even when its WHERE is
 *   false). Replay, conflict and mismatch are answered by that one round trip
 *   and write nothing.
 * - The fencing token (`lease`) is the lease deadline in microseconds since the
 *   epoch, from the database clock. It is an int8 and round-trips exactly (a
 *   timestamptz read back into JS loses microseconds), and every new claim or
 *   takeover makes a strictly larger one, so a stale owner can never match.
 * - Takeover (lease expired) and replace (retention expired) are compare-and-set
 *   UPDATEs on the token read by the claim: exactly one winner.
 * - A renewal is the same compare-and-set by the owner itself: a later lease
 *   and a larger token (LeaseKeeper runs it while the work runs).
 * - The completion is an UPDATE fenced on the token inside the business
 *   transaction: when it matches no row, another attempt owns the key, the
 *   statement raises an error, and the whole transaction rolls back (business
 *   writes included; LeaseLostError). Being an error, the fence holds even
 *   when COMMIT is sent before its answer (a pipelined client, key-queries.ts).
 * - Retention counts from the outcome: the completion sets `expires_at` to
 *   now() + the route's retention. Until then `expires_at` only lets a key that
 *   nothing can resume be replaced: a key with a recovery point, or whose owner
 *   still holds the lease, is never replaced and never purged, whatever its age.
 * - A unit of work (runUnit) is a transaction of the ambient TransactionHost:
 *   the completion, a recovery point and a discard run in it, fenced.
 * - Routes that commit once (`oneCommit`, postgres-one-commit-keys.ts) claim
 *   inside that transaction instead: a transaction-scoped advisory lock, and
 *   the key's row inserted with the response before COMMIT. Their key has no
 *   row while in flight; `outcome` finds its lock in pg_locks.
 *
 * The statements are in statements.ts, how they are sent in key-queries.ts,
 * recovery points in postgres-recovery-points.ts, waiting duplicates in
 * settled-keys.ts.
 *
 * Claims, takeovers and releases commit with synchronous_commit = off, on a pool
 * of their own. That is safe: WAL is flushed in order, so when a business
 * transaction that followed a claim commits durably, the claim's earlier commit
 * record is flushed with it. A claim lost in a crash therefore had nothing
 * committed after it, and the key simply becomes free again. A lost release
 * leaves an in-progress key that a retry takes over after the lease. The setting
 * is a startup parameter of the pool's sessions, so behind a transaction pooler
 * (`postgres.transactionPooler`), which refuses it, claims commit with the server's own.
 */
interface ClaimRow {
  lease: string;
  claimed: boolean;
  same: boolean | null;
  status: number | null;
  body: string | null;
  headers: string | null;
  expired: boolean | null;
  remaining_us: string | null;
  /** What is left of the retention at the statement's now(), in whole milliseconds. */
  retained_ms: string | null;
}

/** When the row committed after our statement's snapshot: answer "retry". */
const UNSEEN_RETRY_MS = 1_000;
const UNSEEN: ClaimResult = { kind: 'in_progress', retryAfterMs: UNSEEN_RETRY_MS };

@Injectable()
export class PostgresIdempotencyStore implements IdempotencyStore, OnModuleDestroy {
  private readonly logger = new Logger('Idempotency');
  private readonly claimPool: Pool;
  /** Every statement, on the configured table. */
  private readonly sql: KeyStatements;
  private readonly queries: KeyQueries;
  /** Stored responses at rest: as sent, or sealed with the key ring. */
  private readonly cipher: ResponseCipher;
  private readonly listener: SettledKeysListener;
  private readonly points: PostgresRecoveryPoints;
  // Typed by the contract, so the package's declarations need no pg types.
  readonly recovery: RecoveryPoints;
  readonly settlement: KeySettlement;
  readonly oneCommit: OneCommitKeys;
  // A property, so that a store extending this one keeps its constructor.
  @Inject(KeyTransactionWrites) private readonly writes!: KeyTransactionWrites;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    @Inject(IDEMPOTENCY_TX_HOST) private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @Inject(IDEMPOTENCY_OPTIONS) options: ResolvedIdempotencyOptions,
  ) {
    const { table, encryption, claimPoolSize, transactionPooler, preparedStatements, listen } = options.postgres;
    this.sql = keyStatements(table.sql);
    this.cipher = new ResponseCipher(encryption);
    this.claimPool = createClaimPool(dataSource, claimPoolSize, transactionPooler);
    this.claimPool.on('error', (error) => this.logger.warn(`idle claim connection failed: ${error.message}`));
    this.queries = new KeyQueries(this.claimPool, txHost, preparedStatements);
    this.points = new PostgresRecoveryPoints(this.queries, this.sql, options.retentionMs);
    this.recovery = this.points;
    this.oneCommit = new PostgresOneCommitKeys(this.queries, oneCommitStatements(table.sql), this.cipher);
    const listenAt = listen && (listen.url ? { connectionString: listen.url } : this.claimPool.options);
    this.listener = new SettledKeysListener(table.name, listenAt);
    this.settlement = {
      awaitSettled: (at, timeoutMs) => this.listener.awaitSettled(at.id, timeoutMs),
      announceSettled: async (at) => {
        await this.queries.autocommit('idempotency_settled', 'SELECT pg_notify($1, $2)', [this.listener.channel, at.id]);
      },
    };
  }

  async onModuleDestroy(): Promise<void> {
    this.listener.stop();
    await this.claimPool.end();
  }

  runUnit<T>(work: () => Promise<T>): Promise<T> {
    return this.queries.unit(() => this.txHost.withTransaction(() => this.writes.within(work)));
  }

  inUnit(): boolean {
    return this.txHost.isTransactionActive();
  }

  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const { scope, key, id, fingerprint, leaseMs, retentionMs } = request;
    const claimed = (token: string, takenOver = false, recovery: StoredRecoveryPoint | null = null): ClaimResult => ({
      kind: 'claimed',
      owner: { scope, key, id, token, retentionMs },
      takenOver,
      recovery: recovery && this.points.ownerOf(id, token, recovery).recovery,
      // Its retention starts at the completion: at least retentionMs from the claim.
      retainedForMs: retentionMs,
    });
    const [row] = await this.queries.autocommit<ClaimRow>('idempotency_claim', this.sql.claim, [id, fingerprint, leaseMs, retentionMs]);
    if (!row) return UNSEEN;
    if (row.claimed) return claimed(row.lease);

    if (row.expired) {
      // Finished past its retention, or abandoned with nothing to resume: the key is new again.
      const [replaced] = await this.queries.autocommit<{ lease: string }>('idempotency_replace', this.sql.replace, [id, row.lease, leaseMs, fingerprint, retentionMs]);
      return replaced ? claimed(replaced.lease) : UNSEEN;
    }
    if (!row.same) return { kind: 'mismatch' };
    if (row.status !== null) {
      return { kind: 'completed', response: this.cipher.open(id, row.status, row.body ?? '', row.headers, key), retainedForMs: Number(row.retained_ms) };
    }
    const remainingMs = Number(row.remaining_us) / 1000;
    if (remainingMs > 0) return { kind: 'in_progress', retryAfterMs: remainingMs };

    // In progress, lease expired: the owner crashed or is too slow (at any age:
    // an operation with a recovery point never expires for its client). One winner.
    const [won] = await this.queries.autocommit<{ lease: string; recovery: StoredRecoveryPoint | null }>('idempotency_takeover', this.sql.takeover, [id, row.lease, leaseMs]);
    return won ? claimed(won.lease, true, won.recovery) : UNSEEN;
  }

  async complete(owner: Ownership, response: StoredResponse): Promise<void> {
    const sealed = this.cipher.seal(owner.id, response);
    const values = [owner.id, owner.token, response.status, sealed.body, sealed.headers, owner.retentionMs];
    await this.queries.lastInTransaction({ name: 'idempotency_complete', text: this.sql.complete, values }, FENCED_WRITE_REFUSED);
  }

  async renew(owner: Ownership, leaseMs: number): Promise<string | null> {
    const [row] = await this.queries.autocommit<{ lease: string }>('idempotency_renew', this.sql.renew, [owner.id, owner.token, leaseMs]);
    return row?.lease ?? null;
  }

  async release(owner: Ownership): Promise<void> {
    await this.queries.autocommit('idempotency_release', this.sql.release, [owner.id, owner.token]);
  }

  async outcome(at: ScopedKey): Promise<KeyOutcome> {
    const [row] = await this.queries.autocommit<{ found: boolean; status: number | null; forgotten: boolean | null; remaining_ms: string; expires_at: string; locked: boolean | null }>(
      'idempotency_outcome',
      this.sql.outcome,
      [at.id],
    );
    if (!row.found || row.forgotten) return row.locked ? { state: 'in_progress', retryAfterMs: UNSEEN_RETRY_MS } : { state: 'unknown' };
    if (row.status === null) return { state: 'in_progress', retryAfterMs: Number(row.remaining_ms) };
    return { state: 'completed', status: row.status, expiresAt: row.expires_at };
  }
}
