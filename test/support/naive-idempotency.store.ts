import { Injectable } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { keyId } from '../../src/idempotency/key-id';
import { decodeResponse, encodeHeaders } from '../../src/idempotency/postgres-idempotency.store';
import { ClaimRequest, ClaimResult, IdempotencyStore, Ownership, RecoveryPoint, StoredResponse } from '../../src/idempotency/idempotency.store';

/**
 * A DELIBERATELY NAIVE store, for the race suite to prove it has teeth:
 * check-then-insert (SELECT, then an upsert when nothing was found) and an
 * unfenced completion. It passes every sequential test and fails under
 * concurrency, as such code does in production. Never use it outside tests.
 */
@Injectable()
export class NaiveIdempotencyStore implements IdempotencyStore {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
  ) {}

  async claim(r: ClaimRequest): Promise<ClaimResult> {
    const [row] = await this.dataSource.query<{ fingerprint: Buffer; status: number | null; body: string | null; headers: string | null }[]>(
      'SELECT fingerprint, status, body, headers FROM idempotency_keys WHERE id = $1',
      [keyId(r.scope, r.key)],
    );
    if (row) {
      if (!row.fingerprint.equals(r.fingerprint)) return { kind: 'mismatch' };
      if (row.status === null) return { kind: 'in_progress', retryAfterMs: 1000 };
      return { kind: 'completed', response: decodeResponse(row.status, row.body ?? '', row.headers) };
    }
    // The race: between the SELECT above and this write, others found nothing too.
    // Naive code does work between its check and its write (logging, a lookup, an
    // await); 5 ms of it keeps the window as wide on a fast idle machine as on a
    // loaded one, so the suite catches this store every run, not just most runs.
    await new Promise((resolve) => setTimeout(resolve, 5));
    await this.dataSource.query(
      `INSERT INTO idempotency_keys (id, fingerprint, lease, expires_at)
       VALUES ($1, $2, 0, now() + interval '1 day')
       ON CONFLICT (id) DO UPDATE SET fingerprint = EXCLUDED.fingerprint`,
      [keyId(r.scope, r.key), r.fingerprint],
    );
    return { kind: 'claimed', owner: { scope: r.scope, key: r.key, token: '0' }, takenOver: false, recovery: null };
  }

  async complete(owner: Ownership, response: StoredResponse): Promise<void> {
    await this.txHost.tx.query('UPDATE idempotency_keys SET status = $2, body = $3, headers = $4 WHERE id = $1', [
      keyId(owner.scope, owner.key),
      response.status,
      response.body,
      encodeHeaders(response),
    ]);
  }

  async release(owner: Ownership): Promise<void> {
    await this.dataSource.query('DELETE FROM idempotency_keys WHERE id = $1 AND status IS NULL', [keyId(owner.scope, owner.key)]);
  }

  // Phases, as naive as the rest: unfenced writes, never a takeover.
  async checkpoint(owner: Ownership, recovery: RecoveryPoint): Promise<void> {
    await this.txHost.tx.query('UPDATE idempotency_keys SET recovery = $2 WHERE id = $1', [
      keyId(owner.scope, owner.key),
      JSON.stringify({ ...recovery, scope: owner.scope, key: owner.key }),
    ]);
  }

  async releaseInTransaction(owner: Ownership): Promise<void> {
    await this.txHost.tx.query('DELETE FROM idempotency_keys WHERE id = $1 AND status IS NULL', [keyId(owner.scope, owner.key)]);
  }

  async yieldLease(): Promise<void> {}

  async takeOverOperation(): Promise<null> {
    return null;
  }

  async takeOverAbandoned(): Promise<{ owner: Ownership; recovery: RecoveryPoint }[]> {
    return [];
  }
}
