import { Injectable } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';

/**
 * Base of the feature repositories: parameterised SQL through the ambient
 * transaction (txHost.tx), so writes commit with the idempotency record. Outside
 * a transaction (GET routes) the same calls run on the pool.
 */
@Injectable()
export abstract class SqlRepository {
  constructor(protected readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  /**
   * The rows of a statement. TypeORM answers UPDATE and DELETE with
   * `[rows, affected]` and everything else with `rows`; callers always get rows.
   */
  protected async rows<T>(sql: string, params: unknown[]): Promise<T[]> {
    const result = await this.txHost.tx.query<unknown>(sql, params);
    if (Array.isArray(result) && result.length === 2 && Array.isArray(result[0]) && typeof result[1] === 'number') {
      return result[0] as T[];
    }
    return result as T[];
  }

  /**
   * Keyset page, newest first: `limit + 1` rows so the caller can tell has_more.
   * The cursor is the id of the last item seen, and its (created_at, id) is read
   * inside the statement: created_at has microseconds, which a value read into a
   * JS Date would lose, skipping every row of the cursor's millisecond that is a
   * few microseconds older. The comparison therefore never leaves PostgreSQL.
   */
  protected page<T>(table: string, columns: string, clientId: string, limit: number, afterId?: string): Promise<T[]> {
    return afterId
      ? this.rows<T>(
          `SELECT ${columns} FROM ${table}
            WHERE client_id = $1
              AND (created_at, id) < (SELECT created_at, id FROM ${table} WHERE client_id = $1 AND id = $2)
            ORDER BY created_at DESC, id DESC LIMIT $3`,
          [clientId, afterId, limit + 1],
        )
      : this.rows<T>(`SELECT ${columns} FROM ${table} WHERE client_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, [
          clientId,
          limit + 1,
        ]);
  }
}
