import { Inject, Injectable, Optional } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { createHash } from 'node:crypto';
import type { PoolClient, QueryConfig } from 'pg';
import { QueryRunner, QueryRunnerProviderAlreadyReleasedError } from 'typeorm';
import { ReadReplicas } from './read-replicas';

/**
 * Whether the repositories name their statements (DATABASE_PREPARED_STATEMENTS):
 * a boolean provided by DatabaseModule.
 */
export const PREPARED_STATEMENTS = Symbol('PREPARED_STATEMENTS');

/** The name of each statement text, prepared once per connection (see SqlRepository.rows). */
const statementNames = new Map<string, string>();

/**
 * A name of at most 63 bytes (PostgreSQL's identifier limit) that only this
 * text has: the hash of the text. The texts are the repositories' constants
 * (values are always parameters), so the map stays as small as the code.
 */
function statementName(sql: string): string {
  let name = statementNames.get(sql);
  if (name === undefined) {
    name = `repo_${createHash('sha256').update(sql).digest('base64url').slice(0, 24)}`;
    statementNames.set(sql, name);
  }
  return name;
}

/**
 * Base of the feature repositories: parameterised SQL through the ambient
 * transaction (txHost.tx), so writes commit with the idempotency record. Outside
 * a transaction (GET routes) the same calls run on the pool.
 *
 * Every statement is prepared (named) on the connection that runs it, the first
 * time it runs there: PostgreSQL then parses it once per connection, and after
 * five runs plans it once too when that plan costs no more than those made for
 * the values (a statement over a batch's arrays through `unnest` keeps being
 * planned for its values: the row count only they tell). Behind a transaction
 * pooler that does not keep prepared statements across transactions (PgBouncer
 * in transaction mode before 1.21, or without max_prepared_statements), a
 * statement prepared in one transaction is missing (or already there) in the
 * next: with `prepared` false (DATABASE_PREPARED_STATEMENTS=off) every
 * statement is sent unnamed and parsed on each run instead.
 */
@Injectable()
export abstract class SqlRepository {
  constructor(
    protected readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @Inject(PREPARED_STATEMENTS) private readonly prepared: boolean,
    @Optional() private readonly replicas?: ReadReplicas,
  ) {}

  /**
   * The rows of a statement (RETURNING rows for INSERT, UPDATE and DELETE), on
   * the transaction's own connection, or outside one on a connection of the
   * pool taken for the statement (a TypeORM query runner). Sent on the
   * connection that `QueryRunner.connect()` answers (node-postgres's client):
   * TypeORM's `query()` has no way to name a statement. `sql` must be one of
   * the code's constant texts, every value a parameter: each distinct text stays
   * prepared on each connection for its lifetime.
   */
  protected async rows<T>(sql: string, params: unknown[]): Promise<T[]> {
    const statement = this.statement(sql, params);
    const manager = this.txHost.tx;
    const runner = manager.queryRunner;
    if (runner) {
      // What TypeORM's query() answers on a transaction whose connection died.
      if (runner.isReleased) throw new QueryRunnerProviderAlreadyReleasedError();
      return run<T>(runner, statement);
    }
    const own = manager.connection.createQueryRunner('master');
    try {
      return await run<T>(own, statement);
    } finally {
      await own.release();
    }
  }

  /**
   * Like rows(), but outside a transaction on a read replica (one of
   * DATABASE_REPLICA_URLS; the primary when there is none, or when the replica
   * fails the read: ReadReplicas). A replica answers as of a moment ago: only
   * for reads whose caller may see the past, the listings. Never for anything
   * that decides a write, and never for keys of idempotency (the store has its
   * own pool, on the primary). Inside a transaction it reads there, so a
   * transaction still sees its own writes.
   */
  protected async replicaRows<T>(sql: string, params: unknown[]): Promise<T[]> {
    if (this.txHost.tx.queryRunner || !this.replicas?.count) return this.rows<T>(sql, params);
    return this.replicas.read<T>(this.statement(sql, params), () => this.rows<T>(sql, params));
  }

  private statement(sql: string, params: unknown[]): QueryConfig {
    return this.prepared ? { name: statementName(sql), text: sql, values: params } : { text: sql, values: params };
  }

  /**
   * Keyset page, newest first: `limit + 1` rows so the caller can tell has_more.
   * The cursor is the id of the last item seen, and its (created_at, id) is read
   * inside the statement: created_at has microseconds, which a value read into a
   * JS Date would lose, skipping every row of the cursor's millisecond that is a
   * few microseconds older. The comparison therefore never leaves PostgreSQL.
   *
   * `from: 'replica'` reads the page from a read replica (replicaRows). A
   * cursor the replica has not received yet (it came from the primary, or from
   * a replica further ahead) reads there as an empty page: that page is then
   * read from the primary, so a cursor never ends a listing early.
   */
  protected async page<T>(
    table: string,
    columns: string,
    clientId: string,
    limit: number,
    afterId?: string,
    from: 'primary' | 'replica' = 'primary',
  ): Promise<T[]> {
    const read = from === 'replica' ? this.replicaRows.bind(this) : this.rows.bind(this);
    if (!afterId) {
      return read<T>(`SELECT ${columns} FROM ${table} WHERE client_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, [clientId, limit + 1]);
    }
    const sql = `SELECT ${columns} FROM ${table}
            WHERE client_id = $1
              AND (created_at, id) < (SELECT created_at, id FROM ${table} WHERE client_id = $1 AND id = $2)
            ORDER BY created_at DESC, id DESC LIMIT $3`;
    const params = [clientId, afterId, limit + 1];
    const rows = await read<T>(sql, params);
    return rows.length === 0 && from === 'replica' ? this.rows<T>(sql, params) : rows;
  }
}

async function run<T>(runner: QueryRunner, statement: QueryConfig): Promise<T[]> {
  const client = (await runner.connect()) as PoolClient;
  return (await client.query(statement)).rows as T[];
}
