import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Pool, PoolClient, QueryConfig } from 'pg';
import { DataSource } from 'typeorm';
import { IDEMPOTENCY_OPTIONS, IDEMPOTENCY_TX_HOST, ResolvedIdempotencyOptions } from '../idempotency.options';
import { LeaseLostError } from '../idempotency.errors';
import { keyId } from '../key-id';
import { ResponseCipher } from '../response-cipher';
import { ClaimRequest, ClaimResult, IdempotencyStore, KeyOutcome, Ownership, RecoveryPoint, StoredResponse } from '../idempotency.store';
import { createClaimPool } from './claim-pool';
import { SettledKeysListener } from './settled-keys';
import { KeyStatements, keyStatements } from './statements';

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
 *   transaction: when it matches no row, another attempt owns the key, and
 *   LeaseLostError rolls the whole transaction back (business writes included).
 * - Retention counts from the outcome: the completion sets `expires_at` to
 *   now() + the route's retention. Until then `expires_at` only lets a key that
 *   nothing can resume be replaced: a key with a recovery point, or whose owner
 *   still holds the lease, is never replaced and never purged, whatever its age.
 *
 * Every statement is prepared (named) unless `preparedStatements` is off: a
 * transaction pooler that does not keep prepared statements across
 * transactions (PgBouncer in transaction mode before 1.21) needs them unnamed.
 * No statement relies on its session: each is autocommit or runs inside the
 * business transaction.
 *
 * Claims, takeovers and releases commit with synchronous_commit = off, on a pool
 * of their own. That is safe: WAL is flushed in order, so when a business
 * transaction that followed a claim commits durably, the claim's earlier commit
 * record is flushed with it. A claim lost in a crash therefore had nothing
 * committed after it, and the key simply becomes free again. A lost release
 * leaves an in-progress key that a retry takes over after the lease. The setting
 * is a startup parameter of the pool's sessions, so behind a transaction pooler
 * (`transactionPooler`), which refuses it, claims commit with the server's own.
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

/**
 * A recovery point as stored: with the scope and key it belongs to, which the
 * row itself does not keep (see keyId), and the route's retention, so that the
 * recovery job can hand the operation its owner again. Cleared with the rest by
 * the completion.
 */
interface StoredRecoveryPoint extends RecoveryPoint {
  scope: string;
  key: string;
  retentionMs?: number;
}

@Injectable()
export class PostgresIdempotencyStore implements IdempotencyStore, OnModuleDestroy {
  private readonly logger = new Logger('Idempotency');
  private readonly claimPool: Pool;
  /** Every statement, on the configured table. */
  private readonly sql: KeyStatements;
  /** Stored responses at rest: as sent, or sealed with the key ring. */
  private readonly cipher: ResponseCipher;
  /** The retention of an operation whose recovery point does not name one. */
  private readonly defaultRetentionMs: number;
  /** Whether statements are sent named (prepared once per connection). */
  private readonly prepared: boolean;
  /** Wakes waiting duplicates when their key settles. */
  private readonly settledKeys: SettledKeysListener;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    @Inject(IDEMPOTENCY_TX_HOST) private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @Inject(IDEMPOTENCY_OPTIONS) options: ResolvedIdempotencyOptions,
  ) {
    this.sql = keyStatements(options.table.sql);
    this.cipher = new ResponseCipher(options.encryption);
    this.defaultRetentionMs = options.retentionMs;
    this.prepared = options.preparedStatements;
    this.claimPool = createClaimPool(dataSource, options.claimPoolSize, options.transactionPooler);
    this.settledKeys = new SettledKeysListener(options.table.name, options.listen && (options.listen.url ? { connectionString: options.listen.url } : this.claimPool.options));
    this.claimPool.on('error', (error) => this.logger.warn(`idle claim connection failed: ${error.message}`));
  }

  async onModuleDestroy(): Promise<void> {
    this.settledKeys.stop();
    await this.claimPool.end();
  }

  awaitSettled(scope: string, key: string, timeoutMs: number): { settled: Promise<void>; cancel(): void } {
    return this.settledKeys.awaitSettled(scope, key, timeoutMs);
  }

  async announceSettled(scope: string, key: string): Promise<void> {
    await this.claimPool.query(this.statement('idempotency_settled', 'SELECT pg_notify($1, $2)', [this.settledKeys.channel, keyId(scope, key)]));
  }

  /** A statement named `name` when statements are prepared, else unnamed (parsed on each run). */
  private statement(name: string, text: string, values: unknown[]): QueryConfig {
    return this.prepared ? { name, text, values } : { text, values };
  }

  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const { scope, key, fingerprint, leaseMs, retentionMs } = request;
    const owned = (token: string) => ({ scope, key, token, retentionMs });
    const id = keyId(scope, key);
    const { rows } = await this.claimPool.query<ClaimRow>(this.statement('idempotency_claim', this.sql.claim, [id, fingerprint, leaseMs, retentionMs]));
    const row = rows[0];
    if (!row) return { kind: 'in_progress', retryAfterMs: UNSEEN_RETRY_MS };
    // A new or replaced key is kept for retentionMs from the statement's now().
    // Its retention starts at the completion: at least retentionMs from the claim.
    if (row.claimed) return { kind: 'claimed', owner: owned(row.lease), takenOver: false, recovery: null, retainedForMs: retentionMs };

    if (row.expired) {
      // Finished past its retention, or abandoned with nothing to resume: the key is new again.
      const replaced = await this.claimPool.query<{ lease: string }>(this.statement('idempotency_replace', this.sql.replace, [id, row.lease, leaseMs, fingerprint, retentionMs]));
      return replaced.rows[0]
        ? { kind: 'claimed', owner: owned(replaced.rows[0].lease), takenOver: false, recovery: null, retainedForMs: retentionMs }
        : { kind: 'in_progress', retryAfterMs: UNSEEN_RETRY_MS };
    }
    if (!row.same) return { kind: 'mismatch' };
    if (row.status !== null) {
      return { kind: 'completed', response: this.cipher.open(id, row.status, row.body ?? '', row.headers), retainedForMs: Number(row.retained_ms) };
    }
    const remainingMs = Number(row.remaining_us) / 1000;
    if (remainingMs > 0) return { kind: 'in_progress', retryAfterMs: remainingMs };

    // In progress, lease expired: the owner crashed or is too slow (at any age:
    // an operation with a recovery point never expires for its client). One winner.
    const taken = await this.claimPool.query<{ lease: string; recovery: StoredRecoveryPoint | null }>(this.statement('idempotency_takeover', this.sql.takeover, [id, row.lease, leaseMs]));
    const won = taken.rows[0];
    return won
      ? {
          kind: 'claimed',
          owner: owned(won.lease),
          takenOver: true,
          recovery: won.recovery && this.ownerOf(won.lease, won.recovery).recovery,
          retainedForMs: retentionMs,
        }
      : { kind: 'in_progress', retryAfterMs: UNSEEN_RETRY_MS };
  }

  async complete(owner: Ownership, response: StoredResponse): Promise<void> {
    const id = keyId(owner.scope, owner.key);
    const sealed = this.cipher.seal(id, response);
    await this.fencedInTransaction('idempotency_complete', this.sql.complete, [id, owner.token, response.status, sealed.body, sealed.headers, owner.retentionMs]);
  }

  async renew(owner: Ownership, leaseMs: number): Promise<string | null> {
    const { rows } = await this.claimPool.query<{ lease: string }>(this.statement('idempotency_renew', this.sql.renew, [keyId(owner.scope, owner.key), owner.token, leaseMs]));
    return rows[0]?.lease ?? null;
  }

  async outcome(scope: string, key: string): Promise<KeyOutcome> {
    const { rows } = await this.claimPool.query<{ status: number | null; forgotten: boolean; remaining_ms: string; expires_at: string }>(
      this.statement('idempotency_outcome', this.sql.outcome, [keyId(scope, key)]),
    );
    const row = rows[0];
    if (!row || row.forgotten) return { state: 'unknown' };
    if (row.status === null) return { state: 'in_progress', retryAfterMs: Number(row.remaining_ms) };
    return { state: 'completed', status: row.status, expiresAt: row.expires_at };
  }

  async checkpoint(owner: Ownership, recovery: RecoveryPoint): Promise<void> {
    const stored: StoredRecoveryPoint = { ...recovery, scope: owner.scope, key: owner.key, retentionMs: owner.retentionMs };
    await this.fencedInTransaction('idempotency_checkpoint', this.sql.checkpoint, [keyId(owner.scope, owner.key), owner.token, JSON.stringify(stored)]);
  }

  async releaseInTransaction(owner: Ownership): Promise<void> {
    await this.fencedInTransaction('idempotency_release_in_transaction', this.sql.releaseInTransaction, [keyId(owner.scope, owner.key), owner.token]);
  }

  async release(owner: Ownership): Promise<void> {
    await this.claimPool.query(this.statement('idempotency_release', this.sql.release, [keyId(owner.scope, owner.key), owner.token]));
  }

  async yieldLease(owner: Ownership): Promise<void> {
    await this.claimPool.query(this.statement('idempotency_yield', this.sql.yield, [keyId(owner.scope, owner.key), owner.token]));
  }

  async takeOverAbandoned(limit: number, leaseMs: number): Promise<{ owner: Ownership; recovery: RecoveryPoint }[]> {
    const { rows } = await this.claimPool.query<{ lease: string; recovery: StoredRecoveryPoint }>(this.statement('idempotency_take_over_abandoned', this.sql.takeOverAbandoned, [limit, leaseMs]));
    return rows.map((r) => this.ownerOf(r.lease, r.recovery));
  }

  async takeOverOperation(scope: string, key: string, leaseMs: number): Promise<{ owner: Ownership; recovery: RecoveryPoint } | null> {
    const { rows } = await this.claimPool.query<{ lease: string; recovery: StoredRecoveryPoint }>(this.statement('idempotency_take_over_operation', this.sql.takeOverOperation, [keyId(scope, key), leaseMs]));
    const row = rows[0];
    return row ? this.ownerOf(row.lease, row.recovery) : null;
  }

  /** A stored recovery point parted into the owner it belongs to (with the new token) and the point itself. */
  private ownerOf(token: string, stored: StoredRecoveryPoint): { owner: Ownership; recovery: RecoveryPoint } {
    const { scope, key, retentionMs, ...recovery } = stored;
    return { owner: { scope, key, token, retentionMs: retentionMs ?? this.defaultRetentionMs }, recovery };
  }

  /**
   * A fenced statement on the ambient business transaction's own
   * connection (what TypeORM's `QueryRunner.connect()` answers: node-postgres's
   * client). LeaseLostError when it matched no row: the key is no longer the
   * owner's, and the caller's transaction rolls back.
   */
  private async fencedInTransaction(name: string, text: string, values: unknown[]): Promise<void> {
    if (!this.txHost.isTransactionActive()) {
      throw new Error(`${name} must run inside the business transaction`);
    }
    const runner = this.txHost.tx.queryRunner;
    if (!runner) throw new Error('the ambient transaction has no query runner');
    const connection = (await runner.connect()) as PoolClient;
    const { rowCount } = await connection.query(this.statement(name, text, values));
    if (!rowCount) throw new LeaseLostError();
  }
}
