import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Pool, PoolClient, QueryConfig, QueryResultRow } from 'pg';
import { LeaseLostError } from '../../contract/idempotency.errors';

/**
 * How the PostgreSQL store sends its statements: autocommit on the claim pool,
 * or fenced inside the ambient business transaction. Every statement is
 * prepared (named) unless `prepared` is off: a transaction pooler that does not
 * keep prepared statements across transactions (PgBouncer in transaction mode
 * before 1.21) needs them unnamed. No statement relies on its session.
 */
export class KeyQueries {
  constructor(
    private readonly claimPool: Pool,
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly prepared: boolean,
  ) {}

  /** One autocommit statement on the claim pool. */
  async autocommit<R extends QueryResultRow>(name: string, text: string, values: unknown[]): Promise<R[]> {
    return (await this.claimPool.query<R>(this.statement(name, text, values))).rows;
  }

  /**
   * A fenced statement on the ambient business transaction's own connection
   * (what TypeORM's `QueryRunner.connect()` answers: node-postgres's client).
   * LeaseLostError when it matched no row: the key is no longer the owner's,
   * and the caller's transaction rolls back.
   */
  async fencedInTransaction(name: string, text: string, values: unknown[]): Promise<void> {
    const { rowCount } = await (await this.transaction(name)).query(this.statement(name, text, values));
    if (!rowCount) throw new LeaseLostError();
  }

  /** A statement on the ambient business transaction's own connection; its rows. */
  async inTransaction<R extends QueryResultRow>(name: string, text: string, values: unknown[]): Promise<R[]> {
    return (await (await this.transaction(name)).query<R>(this.statement(name, text, values))).rows;
  }

  private async transaction(name: string): Promise<PoolClient> {
    if (!this.txHost.isTransactionActive()) {
      throw new Error(`${name} must run inside the business transaction`);
    }
    const runner = this.txHost.tx.queryRunner;
    if (!runner) throw new Error('the ambient transaction has no query runner');
    return (await runner.connect()) as PoolClient;
  }

  /** A statement named `name` when statements are prepared, else unnamed (parsed on each run). */
  private statement(name: string, text: string, values: unknown[]): QueryConfig {
    return this.prepared ? { name, text, values } : { text, values };
  }
}
