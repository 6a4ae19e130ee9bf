import { Injectable } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ClaimRequest, ClaimResult, IdempotencyStore, KeyOutcome, OneCommitKeys, Ownership, RecoveryPoint, RecoveryPoints, ScopedKey, StoredResponse } from 'safe-retries/testing';

/**
 * A DELIBERATELY NAIVE store, for the store contract and the race suite to
 * prove they have teeth:
 * check-then-insert (SELECT, then an upsert when nothing was found) and an
 * unfenced completion. It passes every sequential test and fails under
 * concurrency, as such code does in production. Never use it outside tests.
 *
 * holdClaimWindow(n) makes the failure certain rather than likely: the next n
 * claims that find no row wait for each other before any of them writes, so
 * all n are inside the window between the check and the write at once (where
 * naive code in production lands by chance: a lookup, a log line, an await).
 */
@Injectable()
export class NaiveIdempotencyStore implements IdempotencyStore {
  private window?: ClaimWindow;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
  ) {}

  /** The next `parties` claims that find no row all reach the write only once each of them has found none. */
  holdClaimWindow(parties: number): void {
    this.window = new ClaimWindow(parties);
  }

  async claim(r: ClaimRequest): Promise<ClaimResult> {
    const found = answer(await this.lookup(r), r);
    if (found) return found;
    // The race: between the SELECT above and this write, others find nothing too.
    await this.window?.enter();
    await this.dataSource.query(
      `INSERT INTO idempotency_keys (id, fingerprint, lease, expires_at)
       VALUES ($1, $2, 0, now() + interval '1 day')
       ON CONFLICT (id) DO UPDATE SET fingerprint = EXCLUDED.fingerprint`,
      [r.id, r.fingerprint],
    );
    return { kind: 'claimed', owner: { scope: r.scope, key: r.key, id: r.id, token: '0', retentionMs: r.retentionMs }, takenOver: false, recovery: null };
  }

  async complete(owner: Ownership, response: StoredResponse): Promise<void> {
    await this.txHost.tx.query('UPDATE idempotency_keys SET status = $2, body = $3, headers = $4 WHERE id = $1', [
      owner.id,
      response.status,
      response.body,
      encodeHeaders(response),
    ]);
  }

  async release(owner: Ownership): Promise<void> {
    await this.dataSource.query('DELETE FROM idempotency_keys WHERE id = $1 AND status IS NULL', [owner.id]);
  }

  runUnit<T>(work: () => Promise<T>): Promise<T> {
    return this.txHost.withTransaction(work);
  }

  inUnit(): boolean {
    return this.txHost.isTransactionActive();
  }

  // Phases, as naive as the rest: unfenced writes, never a takeover.
  readonly recovery: RecoveryPoints = {
    checkpoint: async (owner: Ownership, recovery: RecoveryPoint) => {
      await this.txHost.tx.query('UPDATE idempotency_keys SET recovery = $2 WHERE id = $1', [
        owner.id,
        JSON.stringify({ ...recovery, scope: owner.scope, key: owner.key }),
      ]);
    },
    discard: async (owner: Ownership) => {
      await this.txHost.tx.query('DELETE FROM idempotency_keys WHERE id = $1 AND status IS NULL', [owner.id]);
    },
    takeOver: async () => null,
  };

  // Claims inside the unit, as naive: a check with no lock, and an upsert at the end.
  readonly oneCommit: OneCommitKeys = {
    claim: async (r: ClaimRequest): Promise<ClaimResult> => {
      const found = answer(await this.read(this.txHost.tx, r), r);
      if (found) return found;
      await this.window?.enter();
      return { kind: 'claimed', owner: { scope: r.scope, key: r.key, id: r.id, token: '0', retentionMs: r.retentionMs }, takenOver: false, recovery: null };
    },
    complete: async (r: ClaimRequest, response: StoredResponse): Promise<void> => {
      await this.txHost.tx.query(
        `INSERT INTO idempotency_keys (id, fingerprint, lease, expires_at, status, body, headers)
         VALUES ($1, $2, 0, now() + interval '1 day', $3, $4, $5)
         ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, body = EXCLUDED.body, headers = EXCLUDED.headers`,
        [r.id, r.fingerprint, response.status, response.body, encodeHeaders(response)],
      );
    },
  };

  /** The naive check of a durable claim: the key's row as an autocommit statement sees it (no lock: others see none too). */
  protected lookup(r: ClaimRequest): Promise<KeyRow | undefined> {
    return this.read(this.dataSource, r);
  }

  private async read(db: Pick<DataSource, 'query'>, r: ClaimRequest): Promise<KeyRow | undefined> {
    const [row] = await db.query<KeyRow[]>('SELECT fingerprint, status, body, headers FROM idempotency_keys WHERE id = $1', [r.id]);
    return row;
  }

  async outcome(at: ScopedKey): Promise<KeyOutcome> {
    const [row] = await this.dataSource.query<{ status: number | null; expires_at: Date }[]>('SELECT status, expires_at FROM idempotency_keys WHERE id = $1', [
      at.id,
    ]);
    if (!row) return { state: 'unknown' };
    return row.status === null ? { state: 'in_progress', retryAfterMs: 1000 } : { state: 'completed', status: row.status, expiresAt: row.expires_at.toISOString() };
  }

  // An unfenced lease never needs renewing: the token is always '0'.
  async renew(owner: Ownership): Promise<string> {
    return owner.token;
  }
}

/** A key's row as this store reads it. */
export interface KeyRow {
  fingerprint: Buffer;
  status: number | null;
  body: string | null;
  headers: string | null;
}

/** What a claim answers for the key's row, or null when there is none (the key is new). */
function answer(row: KeyRow | undefined, r: ClaimRequest): ClaimResult | null {
  if (!row) return null;
  if (!row.fingerprint.equals(r.fingerprint)) return { kind: 'mismatch' };
  if (row.status === null) return { kind: 'in_progress', retryAfterMs: 1000 };
  return { kind: 'completed', response: decodeResponse(row.status, row.body ?? '', row.headers) };
}

/** A response's content type and Location as this store keeps them in `headers` (its rows are read back by it alone). */
function encodeHeaders(response: StoredResponse): string {
  return JSON.stringify({ contentType: response.contentType, location: response.location });
}

function decodeResponse(status: number, body: string, headers: string | null): StoredResponse {
  const { contentType, location } = JSON.parse(headers ?? '{}') as Partial<StoredResponse>;
  return { status, body, contentType: contentType ?? 'application/json; charset=utf-8', ...(location ? { location } : {}) };
}

/** A rendezvous of `parties` claims: each waits until all have arrived; later ones pass at once. */
class ClaimWindow {
  private arrived = 0;
  private open!: () => void;
  private readonly opened = new Promise<void>((resolve) => (this.open = resolve));

  constructor(private readonly parties: number) {}

  enter(): Promise<void> {
    this.arrived += 1;
    if (this.arrived >= this.parties) this.open();
    return this.opened;
  }
}
