import { Inject, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { createHash } from 'node:crypto';
import { Client, ClientConfig, Pool, PoolClient, QueryConfig } from 'pg';
import { DataSource } from 'typeorm';
import { IDEMPOTENCY_OPTIONS, IDEMPOTENCY_TX_HOST, ResolvedIdempotencyOptions } from './idempotency.options';
import { LeaseLostError } from './idempotency.errors';
import { keyId } from './key-id';
import { ResponseCipher } from './response-cipher';
import { ClaimRequest, ClaimResult, IdempotencyStore, KeyOutcome, Ownership, RecoveryPoint, StoredResponse } from './idempotency.store';

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
/** The database clock in microseconds since the epoch: the unit of `lease`, the fencing token. */
export const NOW_US = `(extract(epoch FROM now()) * 1000000)::int8`;

/**
 * A key past its expiry that nothing can resume: finished (its retention ran out
 * from its completion), or abandoned before any recovery point. Such a key is
 * new again (replace) and may be purged. The purge's condition is this one.
 */
export const REPLACEABLE = `(expires_at <= now() AND (status IS NOT NULL OR (lease <= ${NOW_US} AND recovery IS NULL)))`;

// The existing row is read first, in the same statement: when it is there the
// INSERT is not even attempted, so a duplicate never waits on the owner's
// uncommitted completion (an INSERT that meets a row being updated would wait
// for that transaction to end). When the row committed after this statement's
// snapshot, neither branch returns a row: the caller answers 409, retry.
const CLAIM_SQL = (t: string) => `
WITH cur AS (
  SELECT lease, fingerprint = $2::bytea AS same, status, body, headers,
         ${REPLACEABLE} AS expired, lease - ${NOW_US} AS remaining_us,
         floor(extract(epoch FROM expires_at - now()) * 1000)::int8 AS retained_ms
    FROM ${t}
   WHERE id = $1::uuid
), ins AS (
  INSERT INTO ${t} (id, lease, expires_at, fingerprint)
  SELECT $1::uuid, ${NOW_US} + $3::int8 * 1000, now() + $4::int8 * interval '1 millisecond', $2::bytea
   WHERE NOT EXISTS (SELECT 1 FROM cur)
  ON CONFLICT (id) DO NOTHING
  RETURNING lease
)
SELECT lease::text AS lease, true AS claimed, NULL::bool AS same, NULL::int2 AS status,
       NULL::text AS body, NULL::text AS headers, NULL::bool AS expired, NULL::int8 AS remaining_us,
       NULL::int8 AS retained_ms
  FROM ins
UNION ALL
SELECT lease::text, false, same, status, CASE WHEN same THEN body END, CASE WHEN same THEN headers END,
       expired, remaining_us, retained_ms
  FROM cur`;

const TAKEOVER_SQL = (t: string) => `
UPDATE ${t} SET lease = ${NOW_US} + $3::int8 * 1000
 WHERE id = $1::uuid AND lease = $2::int8
   AND status IS NULL AND lease <= ${NOW_US}
RETURNING lease::text AS lease, recovery`;

const REPLACE_SQL = (t: string) => `
UPDATE ${t}
   SET fingerprint = $4::bytea, lease = ${NOW_US} + $3::int8 * 1000,
       expires_at = now() + $5::int8 * interval '1 millisecond', status = NULL, body = NULL, headers = NULL
 WHERE id = $1::uuid AND lease = $2::int8 AND ${REPLACEABLE}
RETURNING lease::text AS lease`;

// The statements fenced on the owner's token run inside a business transaction:
// when one matches no row, the key is no longer the caller's, and LeaseLostError
// rolls that transaction back. A lost lease can never commit.

// Clears the recovery point (NULL stays NULL on other routes, so their completion
// stays a HOT update; see the migration of the recovery index). The retention
// starts here, at the outcome.
const COMPLETE_SQL = (t: string) => `
UPDATE ${t} SET status = $3::int2, body = $4::text, headers = $5::text, recovery = NULL,
       expires_at = now() + $6::int8 * interval '1 millisecond'
 WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL`;

// The owner's own compare-and-set: a later lease, and a token larger than any
// before it (GREATEST: even a lease that was extended further stays ordered).
const RENEW_SQL = (t: string) => `
UPDATE ${t} SET lease = GREATEST(${NOW_US} + $3::int8 * 1000, lease + 1)
 WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL
RETURNING lease::text AS lease`;

// A phase's recovery point, fenced like the completion, in the phase's transaction.
const CHECKPOINT_SQL = (t: string) => `
UPDATE ${t} SET recovery = $3::jsonb
 WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL`;

// The lease ends now; the token stays, so only this owner can yield, and any
// takeover makes a larger one.
const YIELD_SQL = (t: string) => `
UPDATE ${t} SET lease = ${NOW_US}
 WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL AND lease > ${NOW_US}`;

// SKIP LOCKED: instances running the recovery job at once split the work; the
// lease compare-and-set makes each takeover a single winner against retries too.
const TAKE_OVER_ABANDONED_SQL = (t: string) => `
WITH abandoned AS (
  SELECT id, lease FROM ${t}
   WHERE recovery IS NOT NULL AND status IS NULL AND lease <= ${NOW_US}
   ORDER BY lease
   LIMIT $1
   FOR UPDATE SKIP LOCKED
)
UPDATE ${t} k SET lease = ${NOW_US} + $2::int8 * 1000
  FROM abandoned a
 WHERE k.id = a.id AND k.lease = a.lease
RETURNING k.lease::text AS lease, k.recovery`;

// One operation by its key, when its lease has ended (abandoned, or given up
// after an unknown outcome): the same compare-and-set as any takeover.
const TAKE_OVER_OPERATION_SQL = (t: string) => `
UPDATE ${t} SET lease = ${NOW_US} + $2::int8 * 1000
 WHERE id = $1::uuid AND recovery IS NOT NULL AND status IS NULL AND lease <= ${NOW_US}
RETURNING lease::text AS lease, recovery`;

// What a client may be told about its key: nothing is written, nothing locked.
const OUTCOME_SQL = (t: string) => `
SELECT status, ${REPLACEABLE} AS forgotten, greatest(lease - ${NOW_US}, 0) / 1000 AS remaining_ms,
       to_json(expires_at) #>> '{}' AS expires_at
  FROM ${t}
 WHERE id = $1::uuid`;

const RELEASE_SQL = (t: string) => `
DELETE FROM ${t}
 WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL`;

// After a failure outside a phase's commit: the key goes only if no recovery
// point committed. A phase whose COMMIT took effect although its acknowledgement
// was lost has left one: the key is then kept with it and its lease ends now,
// so the next attempt (a retry or the recovery job) resumes the operation.
const RELEASE_UNLESS_CHECKPOINTED_SQL = (t: string) => `
WITH gone AS (
  DELETE FROM ${t}
   WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL AND recovery IS NULL
  RETURNING 1
)
UPDATE ${t} SET lease = ${NOW_US}
 WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL AND recovery IS NOT NULL AND lease > ${NOW_US}`;

function statements(table: string) {
  return {
    claim: CLAIM_SQL(table),
    takeover: TAKEOVER_SQL(table),
    renew: RENEW_SQL(table),
    outcome: OUTCOME_SQL(table),
    replace: REPLACE_SQL(table),
    complete: COMPLETE_SQL(table),
    checkpoint: CHECKPOINT_SQL(table),
    yield: YIELD_SQL(table),
    takeOverAbandoned: TAKE_OVER_ABANDONED_SQL(table),
    takeOverOperation: TAKE_OVER_OPERATION_SQL(table),
    release: RELEASE_UNLESS_CHECKPOINTED_SQL(table),
    // Inside a phased operation's last transaction: fenced like the completion.
    releaseInTransaction: RELEASE_SQL(table),
  };
}

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

/** A response's `headers` column when it is stored unencrypted (see ResponseCipher). */
export function encodeHeaders(response: StoredResponse): string | null {
  return PLAIN.seal('', response).headers;
}

/** A response stored unencrypted, as the claim reads it (see ResponseCipher). */
export function decodeResponse(status: number, body: string, headers: string | null): StoredResponse {
  return PLAIN.open('', status, body, headers);
}

const PLAIN = new ResponseCipher();

/** A waiter asks the claim again at least this often (a lost notification costs no more). */
const MAX_WAIT_SLICE_MS = 1_000;
/** Without a listener (behind a transaction pooler, no listenUrl), a waiter asks again this often. */
const POLL_WAIT_SLICE_MS = 250;

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
  private readonly sql: ReturnType<typeof statements>;
  private readonly tableName: string;
  /** Stored responses at rest: as sent, or sealed with the key ring. */
  private readonly cipher: ResponseCipher;
  /** The retention of an operation whose recovery point does not name one. */
  private readonly defaultRetentionMs: number;
  /** Whether statements are sent named (prepared once per connection). */
  private readonly prepared: boolean;
  /** Where the listener of settled keys connects, or false: waiters poll. */
  private readonly listenAt: ClientConfig | false;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    @Inject(IDEMPOTENCY_TX_HOST) private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @Inject(IDEMPOTENCY_OPTIONS) options: ResolvedIdempotencyOptions,
  ) {
    this.sql = statements(options.table.sql);
    this.cipher = new ResponseCipher(options.encryption);
    this.defaultRetentionMs = options.retentionMs;
    this.tableName = options.table.name;
    this.prepared = options.preparedStatements;
    this.claimPool = createClaimPool(dataSource, options.claimPoolSize, options.transactionPooler);
    this.listenAt = options.listen && (options.listen.url ? { connectionString: options.listen.url } : this.claimPool.options);
    this.claimPool.on('error', (error) => this.logger.warn(`idle claim connection failed: ${error.message}`));
  }

  async onModuleDestroy(): Promise<void> {
    this.stopListening();
    await this.claimPool.end();
  }

  /*
   * Waiting duplicates (`@Idempotent({ wait })`). One connection per process
   * LISTENs on one channel (a session of its own: on `listenUrl` when given,
   * never through a transaction pooler); a settled key is announced with
   * pg_notify on the claim pool, after its completion or release committed,
   * with the key's row id (keyId, a hash) as payload: the key itself never
   * travels. Every waiter also wakes at least once a second and asks the claim
   * again, so a notification lost while the listener reconnects costs at most
   * that second: no polling storm, and no reliance on delivery. Without a
   * listener (a transaction pooler and no listenUrl) waiters only poll, every
   * POLL_WAIT_SLICE_MS, each one primary-key lookup.
   */
  private listener?: Promise<Client>;
  private readonly waiters = new Map<string, Set<() => void>>();

  awaitSettled(scope: string, key: string, timeoutMs: number): { settled: Promise<void>; cancel(): void } {
    const id = keyId(scope, key);
    let wake!: () => void;
    const settled = new Promise<void>((resolve) => (wake = resolve));
    const slice = this.listenAt ? MAX_WAIT_SLICE_MS : POLL_WAIT_SLICE_MS;
    const timer = setTimeout(() => done(), Math.max(0, Math.min(timeoutMs, slice)));
    const done = () => {
      clearTimeout(timer);
      const set = this.waiters.get(id);
      set?.delete(done);
      if (set?.size === 0) this.waiters.delete(id);
      wake();
    };
    const set = this.waiters.get(id) ?? new Set();
    set.add(done);
    this.waiters.set(id, set);
    if (this.listenAt) void this.listen(this.listenAt);
    return { settled, cancel: done };
  }

  async announceSettled(scope: string, key: string): Promise<void> {
    await this.claimPool.query(this.statement('idempotency_settled', 'SELECT pg_notify($1, $2)', [this.channel, keyId(scope, key)]));
  }

  /** The channel of this table's settled keys (an identifier: at most 63 bytes). */
  private get channel(): string {
    const name = `${this.tableName}_settled`;
    return Buffer.byteLength(name) <= 63 ? name : `idempotency_settled_${createHash('sha256').update(name).digest('hex').slice(0, 16)}`;
  }

  /** A statement named `name` when statements are prepared, else unnamed (parsed on each run). */
  private statement(name: string, text: string, values: unknown[]): QueryConfig {
    return this.prepared ? { name, text, values } : { text, values };
  }

  private listen(at: ClientConfig): Promise<Client | undefined> {
    this.listener ??= (async () => {
      const client = new Client({ ...at, application_name: 'safe-retries-waits' });
      client.on('notification', (message) => {
        for (const wake of [...(this.waiters.get(message.payload ?? '') ?? [])]) wake();
      });
      client.on('error', (error) => {
        this.logger.warn(`the listener of settled keys failed: ${error.message}`);
        this.stopListening();
      });
      await client.connect();
      await client.query(`LISTEN ${client.escapeIdentifier(this.channel)}`);
      return client;
    })();
    return this.listener.catch((error: unknown) => {
      this.logger.warn(`cannot listen for settled keys: ${(error as Error).message}`);
      this.listener = undefined;
      return undefined;
    });
  }

  private stopListening(): void {
    const listener = this.listener;
    this.listener = undefined;
    void listener?.then((c) => c.end()).catch(() => undefined);
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

interface Credentials {
  url?: string;
  host?: string;
  port?: number;
  username?: string;
  password?: unknown;
  database?: string;
  ssl?: unknown;
}

/**
 * The claim pool connects to the primary, always: with TypeORM's replication
 * options that is `replication.master`, never one of the `slaves`. A claim or
 * replay lookup answered by a lagging replica would see no key and run the
 * request a second time. Behind a transaction pooler it sets no session
 * parameter (PgBouncer refuses `options` at connect).
 */
function createClaimPool(dataSource: DataSource, max: number, transactionPooler: boolean): Pool {
  const options = dataSource.options as Credentials & {
    replication?: { master: Credentials };
    extra?: { connectionTimeoutMillis?: number };
  };
  const o: Credentials = options.replication?.master ?? options;
  return new Pool({
    connectionString: o.url,
    host: o.host,
    port: o.port,
    user: o.username,
    password: typeof o.password === 'string' ? o.password : undefined,
    database: o.database,
    ssl: o.ssl as never,
    max,
    connectionTimeoutMillis: options.extra?.connectionTimeoutMillis ?? 3_000,
    // Claims are single short statements: a frozen server is an outage (503).
    query_timeout: 5_000,
    keepAlive: true,
    application_name: 'safe-retries-claims',
    ...(transactionPooler ? {} : { options: '-c synchronous_commit=off' }),
  });
}
