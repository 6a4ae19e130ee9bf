import { Injectable } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ClaimRequest } from 'safe-retries/testing';
import { KeyRow, NaiveIdempotencyStore } from '../../packages/idempotency/test/support/naive-idempotency.store';
import { ReadReplicas } from '../../src/database/read-replicas';

/**
 * A DELIBERATELY WRONG store, for the replica suite to prove it has teeth: the
 * naive store (right for requests that come one after another, as the retry
 * of that suite does), except that a claim looks the key up on a read replica
 * (the app's ReadReplicas, as the listings do) and believes the answer. When
 * the replica has not applied the first request's key yet, it answers "no such
 * key" and the key is written as new on the primary (an upsert: "nobody has
 * it"), so a retry right after the first response runs the payment again: the
 * double charge of a key read from a replica. Never use it outside tests.
 */
@Injectable()
export class ReplicaReadIdempotencyStore extends NaiveIdempotencyStore {
  constructor(
    @InjectDataSource() dataSource: DataSource,
    txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly replicas: ReadReplicas,
  ) {
    super(dataSource, txHost);
  }

  protected override async lookup(r: ClaimRequest): Promise<KeyRow | undefined> {
    const [row] = await this.replicas.read<KeyRow>({ text: 'SELECT fingerprint, status, body, headers FROM idempotency_keys WHERE id = $1', values: [r.id] }, () =>
      Promise.reject(new Error('the control store reads keys from the replica only')),
    );
    return row;
  }
}
