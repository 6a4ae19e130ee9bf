import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsServiceManager } from 'nestjs-cls';
import { Pool, PoolClient, QueryConfig, QueryResultRow } from 'pg';
import { LeaseLostError } from '../../contract/idempotency.errors';

/** A statement of the store: its name (when prepared), text and values. */
export interface Statement {
  name: string;
  text: string;
  values: unknown[];
}

/** What the statements of one unit (KeyQueries.unit) leave for it, kept in the unit's nestjs-cls context. */
interface UnitWrites {
  /** The answer to the unit's last write, sent without waiting: the error it met, or undefined. */
  last?: Promise<Error | undefined>;
  /** The id of the key a one-commit claim of this unit found with no row. */
  unseenKey?: string;
}

const UNIT_WRITES = Symbol('idempotency.unit-writes');

/**
 * How the PostgreSQL store sends its statements: autocommit on the claim pool,
 * or fenced inside the ambient business transaction. Every statement is
 * prepared (named) unless `prepared` is off: a transaction pooler that does not
 * keep prepared statements across transactions (PgBouncer in transaction mode
 * before 1.21) needs them unnamed. No statement relies on its session.
 *
 * When the transaction's client pipelines (node-postgres's `pipeline: true`,
 * which an app sets through TypeORM's `extra`), statements that need not wait
 * for each other are sent together: a claim with its read (inTransactionThen),
 * and a unit's last write with its COMMIT (lastInTransaction). Each still has
 * its own answer. A client that does not pipeline gets them one after another.
 */
export class KeyQueries {
  constructor(
    private readonly claimPool: Pool,
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly prepared: boolean,
  ) {}

  /** nestjs-cls's service (one per process, the one TransactionHost keeps its transaction in). */
  private get cls() {
    return ClsServiceManager.getClsService();
  }

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

  /**
   * `first` on the ambient transaction's connection, then `next` when `wanted`
   * by the rows of `first`: their rows (null for `next` not wanted). A
   * pipelined client is sent both at once (one round trip; `next` runs either
   * way, its rows unused when not wanted); another sends `next` only after the
   * answer to `first`, and only when wanted.
   */
  async inTransactionThen<A extends QueryResultRow, B extends QueryResultRow>(first: Statement, next: Statement, wanted: (rows: A[]) => boolean): Promise<[A[], B[] | null]> {
    const client = await this.transaction(first.name);
    if (!client.pipeline) {
      const rows = (await client.query<A>(this.statement(first.name, first.text, first.values))).rows;
      return [rows, wanted(rows) ? (await client.query<B>(this.statement(next.name, next.text, next.values))).rows : null];
    }
    const [a, b] = await Promise.all([client.query<A>(this.statement(first.name, first.text, first.values)), client.query<B>(this.statement(next.name, next.text, next.values))]);
    return [a.rows, wanted(a.rows) ? b.rows : null];
  }

  /**
   * The unit's last write on the ambient transaction's connection, fenced by
   * an error: `refusal` (an SQLSTATE) is what the statement raises when the
   * key is no longer the unit's, answered as LeaseLostError. The error aborts
   * the transaction, so its COMMIT rolls everything back. On a pipelined
   * client inside `unit`, it is sent without waiting for its answer: COMMIT
   * follows it in the same round trip, and `unit` throws its error once the
   * transaction has ended. Otherwise its error is thrown here.
   */
  async lastInTransaction(statement: Statement, refusal: string): Promise<void> {
    const client = await this.transaction(statement.name);
    const answer = client.query(this.statement(statement.name, statement.text, statement.values)).then(
      () => undefined,
      (error: Error & { code?: string }) => (error.code === refusal ? new LeaseLostError() : error),
    );
    const unit = this.writesOfUnit();
    if (client.pipeline && unit) {
      unit.last = answer;
      return;
    }
    const error = await answer;
    if (error) throw error;
  }

  /**
   * A unit of work (its transaction and what runs in it). Its last write, when
   * sent without waiting (lastInTransaction), is answered once the
   * transaction has ended: a refused last write is the unit's error (its
   * COMMIT found the transaction aborted and rolled it back), and explains a
   * failed COMMIT as well.
   */
  async unit<T>(transaction: () => Promise<T>): Promise<T> {
    const writes: UnitWrites = {};
    let value: T;
    try {
      // A context of its own that inherits the caller's values: the writes are this unit's alone.
      value = await this.cls.run({ ifNested: 'inherit' }, () => {
        this.cls.set(UNIT_WRITES, writes);
        return transaction();
      });
    } catch (error) {
      throw (await writes.last) ?? error;
    }
    const refused = await writes.last;
    if (refused) throw refused;
    return value;
  }

  /** What this unit's statements noted for it (undefined outside a unit). */
  currentUnit(): Pick<UnitWrites, 'unseenKey'> | undefined {
    return this.writesOfUnit();
  }

  private writesOfUnit(): UnitWrites | undefined {
    return this.cls.isActive() ? this.cls.get<UnitWrites | undefined>(UNIT_WRITES) : undefined;
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
