import { Logger, OnModuleDestroy } from '@nestjs/common';
import { Pool, QueryConfig, QueryResultRow } from 'pg';
import { Counter, Registry } from 'prom-client';
import { isDatabaseUnavailable, sqlState } from './database-errors';

/** Why a replica read was answered from the primary (the metric's `reason`). */
export type ReplicaFallbackReason = 'unavailable' | 'behind' | 'conflict' | 'error';

/** SQLSTATEs of what the replica has not received yet: a database, schema, table, column, function or type missing. */
const SCHEMA_BEHIND = new Set(['3D000', '3F000', '42P01', '42703', '42883', '42704']);
/** What a standby raises when it cancels a query for a conflict with recovery (or a deadlock with it). */
const RECOVERY_CONFLICT = new Set(['40001', '40P01']);

/** A replica's failures are logged at most this often; the ones between are counted in the next line. */
export const REPLICA_LOG_INTERVAL_MS = 60_000;

export function fallbackReason(error: unknown): ReplicaFallbackReason {
  if (isDatabaseUnavailable(error)) return 'unavailable';
  const state = sqlState(error);
  if (state && SCHEMA_BEHIND.has(state)) return 'behind';
  if (state && RECOVERY_CONFLICT.has(state)) return 'conflict';
  return 'error';
}

interface Replica {
  /** `1 of 2`: the metric's label and the log's name (a URL may carry a password). */
  label: string;
  /** host:port/database, for the log line. */
  where: string;
  pool: Pool;
  loggedAt: number;
  /** Fallbacks since the last line. */
  unlogged: number;
}

/**
 * The read replicas (DATABASE_REPLICA_URLS): a pool per replica, read in turn,
 * for the reads that may see the past (SqlRepository.replicaRows). A replica
 * can fail a read that the primary answers: it is stopped or unreachable, it
 * has not replayed the primary's migrations yet (a fresh database: `relation
 * "payments" does not exist`), or a recovery conflict cancelled the query.
 * The read is then answered from the primary: a replica is an optimisation,
 * never a reason for a 500. Each fallback is counted in
 * `database_replica_fallbacks_total{replica, reason}` and logged at most once
 * per replica and minute, with the count since the last line.
 */
export class ReadReplicas implements OnModuleDestroy {
  private readonly replicas: Replica[];
  private readonly fallbacks?: Counter<'replica' | 'reason'>;
  private next = 0;

  constructor(
    urls: readonly string[],
    poolSize: number,
    registry: Registry | undefined,
    private readonly logger: Pick<Logger, 'warn'> = new Logger('Database'),
    private readonly now: () => number = Date.now,
  ) {
    this.replicas = urls.map((url, i) => {
      const pool = new Pool({
        connectionString: url,
        max: poolSize,
        // As the primary's pool: a dead replica fails fast, and the read goes to the primary.
        connectionTimeoutMillis: 3_000,
        query_timeout: 30_000,
        keepAlive: true,
        application_name: 'safe-retries',
      });
      // An idle connection the replica ended (it stopped, restarted): dropped; the next read reconnects.
      pool.on('error', () => undefined);
      return { label: `${i + 1} of ${urls.length}`, where: where(url), pool, loggedAt: -Infinity, unlogged: 0 };
    });
    if (registry && this.replicas.length) {
      this.fallbacks = new Counter({
        name: 'database_replica_fallbacks_total',
        help: 'Reads meant for a read replica answered from the primary, by replica and reason (unavailable, behind, conflict, error)',
        labelNames: ['replica', 'reason'],
        registers: [registry],
      });
    }
  }

  get count(): number {
    return this.replicas.length;
  }

  /** The rows of `statement` on the next replica; on the primary (`primary()`) when there is none or it fails. */
  async read<T>(statement: QueryConfig, primary: () => Promise<T[]>): Promise<T[]> {
    if (!this.replicas.length) return primary();
    const replica = this.replicas[this.next++ % this.replicas.length];
    try {
      return (await replica.pool.query<QueryResultRow>(statement)).rows as T[];
    } catch (error) {
      this.fellBack(replica, error);
      return primary();
    }
  }

  private fellBack(replica: Replica, error: unknown): void {
    const reason = fallbackReason(error);
    this.fallbacks?.inc({ replica: replica.label, reason });
    const now = this.now();
    if (now - replica.loggedAt < REPLICA_LOG_INTERVAL_MS) {
      replica.unlogged++;
      return;
    }
    const since = replica.unlogged ? `; ${replica.unlogged} more since the last line` : '';
    this.logger.warn(
      `read replica ${replica.label} (${replica.where}) failed a read (${reason}: ${(error as Error)?.message ?? String(error)}): answered from the primary${since}`,
    );
    replica.loggedAt = now;
    replica.unlogged = 0;
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.pool.end()));
  }
}

/** host:port/database of a URL, without its user and password. */
function where(url: string): string {
  try {
    const u = new URL(url);
    return `${u.host}${u.pathname}`;
  } catch {
    return '(unparseable URL)';
  }
}
