import { Inject, Injectable } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from 'safe-retries/swagger';
import { ClaimRequest, ClaimResult } from 'safe-retries/testing';
import { IDEMPOTENCY_TX_HOST, PostgresIdempotencyStore, decodeResponse } from '../../packages/idempotency/test/support/internals';
import { NOW_US } from '../../packages/idempotency/test/support/keys-table';
import { ReadReplicas } from '../../src/database/read-replicas';

/**
 * A DELIBERATELY WRONG store, for the replica suite to prove it has teeth: the
 * real store, except that claim-or-get looks the key up on a read replica (the
 * app's ReadReplicas, as the listings do) and believes the answer. When
 * the replica has not applied the first request's key yet, it answers "no such
 * key" and the key is written as new on the primary (an upsert: "nobody has
 * it"), so a retry right after the first response runs the payment again: the
 * double charge of a key read from a replica. Everything else (the fenced
 * completion, phases, release) is the real store's. Never use it outside tests.
 */
@Injectable()
export class ReplicaReadIdempotencyStore extends PostgresIdempotencyStore {
  private readonly table: string;

  constructor(
    @InjectDataSource() private readonly data: DataSource,
    @Inject(IDEMPOTENCY_TX_HOST) txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @Inject(IDEMPOTENCY_OPTIONS) options: ResolvedIdempotencyOptions,
    private readonly replicas: ReadReplicas,
  ) {
    super(data, txHost, options);
    this.table = options.postgres.table.sql;
  }

  override async claim(r: ClaimRequest): Promise<ClaimResult> {
    const { id } = r;
    const [found] = await this.replicas.read<{ same: boolean; status: number | null; body: string | null; headers: string | null }>(
      { text: `SELECT fingerprint = $2::bytea AS same, status, body, headers FROM ${this.table} WHERE id = $1::uuid`, values: [id, r.fingerprint] },
      () => Promise.reject(new Error('the control store reads keys from the replica only')),
    );
    if (found) {
      if (!found.same) return { kind: 'mismatch' };
      if (found.status === null) return { kind: 'in_progress', retryAfterMs: 1_000 };
      return { kind: 'completed', response: decodeResponse(found.status, found.body ?? '', found.headers) };
    }
    const [{ lease }] = await this.data.query<{ lease: string }[]>(
      `INSERT INTO ${this.table} (id, lease, expires_at, fingerprint)
       VALUES ($1::uuid, ${NOW_US} + $3::int8 * 1000, now() + $4::int8 * interval '1 millisecond', $2::bytea)
       ON CONFLICT (id) DO UPDATE SET lease = EXCLUDED.lease, fingerprint = EXCLUDED.fingerprint,
                                      status = NULL, body = NULL, headers = NULL, recovery = NULL
       RETURNING lease::text AS lease`,
      [id, r.fingerprint, r.leaseMs, r.retentionMs],
    );
    return { kind: 'claimed', owner: { scope: r.scope, key: r.key, id, token: lease, retentionMs: r.retentionMs }, takenOver: false, recovery: null };
  }
}
