import { TransactionalAdapterTypeOrm, TypeOrmTransactionalAdapterOptions } from '@nestjs-cls/transactional-adapter-typeorm';
import type { PoolClient, QueryResult } from 'pg';
import type { DataSource, EntityManager } from 'typeorm';
import type { IsolationLevel } from 'typeorm/driver/types/IsolationLevel';

/**
 * Fewer round trips for the transactions the module runs, with node-postgres's
 * pipeline mode (pg 8.23+; on a pg without it, or under another adapter,
 * everything runs as before, one statement per round trip):
 *
 * - BEGIN waits for the transaction's first statement and travels with it: one
 *   round trip and one socket write instead of two. A transaction that runs no
 *   statement sends nothing at all.
 * - The last statement of a transaction the module opened (the fenced
 *   completion, a recovery point, a fenced release) travels with COMMIT
 *   (`commitWith`). Those statements raise an error when the key is no longer
 *   the caller's, so the COMMIT behind them meets an aborted transaction and
 *   PostgreSQL rolls it back: a lost lease still never commits.
 *
 * Pipeline mode is switched on only while such a batch is in flight, so the
 * client is a plain one otherwise (cursors and streams keep working), and only
 * when the client is idle (nothing queued or in flight on it).
 */

/** The parts of node-postgres's Client this relies on (present since pg 8.23, checked at run time). */
interface PipelinableClient extends PoolClient {
  pipeline: boolean;
  readyForQuery: boolean;
  _queryQueue: unknown[];
  _sentQueryQueue: unknown[];
}

type QueryText = string | { text: string; name?: string; values?: unknown[] };
/** What a statement answered (node-postgres's QueryResult; pg's types stay out of the package's declarations). */
export interface StatementResult {
  command: string;
  rowCount: number | null;
  rows: unknown[];
}
type Query = [text: QueryText, values?: unknown[]];
type QueryFunction = (text: QueryText, values?: unknown[], callback?: unknown) => Promise<QueryResult>;

const PIPELINE = Symbol.for('safe-retries.transaction-pipeline');
const START = 'START TRANSACTION';
const SET_ISOLATION = 'SET TRANSACTION ISOLATION LEVEL ';

/** What node-postgres answers to a statement that was never sent (it had nothing to do). */
function unsent(command: string): QueryResult {
  return { command, rowCount: null, oid: 0, rows: [], fields: [] } as unknown as QueryResult;
}

/** The first failure of statements sent in order (a later one failed because of it), else the last answer. */
function firstFailureOrLast(settled: PromiseSettledResult<QueryResult>[]): QueryResult {
  for (const outcome of settled) if (outcome.status === 'rejected') throw outcome.reason;
  return (settled[settled.length - 1] as PromiseFulfilledResult<QueryResult>).value;
}

function canPipeline(client: PoolClient): client is PipelinableClient {
  const c = client as unknown as Partial<PipelinableClient>;
  return typeof c.pipeline === 'boolean' && typeof c.readyForQuery === 'boolean' && Array.isArray(c._queryQueue) && Array.isArray(c._sentQueryQueue);
}

/**
 * One transaction's statements on its pooled client: holds BEGIN back until the
 * first statement, and sends the last one with COMMIT. Installed on a client
 * once (its `query` shadowed, for good) and active for one transaction at a
 * time (the adapter below begins and ends it); between transactions the
 * client's `query` goes straight to pg's. Installed once rather than per
 * transaction because adding and deleting properties on each transaction
 * turned pg's client objects into dictionaries, which slowed every access to them.
 */
export class TransactionPipeline {
  /** A transaction runs on the client (between attach() and detach()). */
  private active = false;
  /** BEGIN (and the isolation level) held back until the first statement. */
  private held: string[] = [];
  /** Set once commitWith has ended the transaction (committed, or rolled back by the server). */
  private ended = false;

  private constructor(
    private readonly client: PipelinableClient,
    /** The client's own query method. */
    private readonly send: QueryFunction,
  ) {}

  /**
   * Begins a transaction's pipeline on a client just taken from the pool
   * (installing one on a client seen for the first time), or returns undefined
   * when its pg cannot pipeline or a pipeline already runs on it.
   */
  static attach(client: object): TransactionPipeline | undefined {
    if (!canPipeline(client as PoolClient)) return undefined;
    let pipeline = (client as Record<symbol, TransactionPipeline | undefined>)[PIPELINE];
    if (pipeline === undefined) {
      const pg = client as PipelinableClient;
      const installed = new TransactionPipeline(pg, pg.query.bind(pg) as QueryFunction);
      const query = (text: QueryText, values?: unknown[], callback?: unknown) =>
        installed.active ? installed.query(text, values, callback) : installed.send(text, values, callback);
      Object.defineProperty(client, 'query', { value: query, configurable: true, writable: true });
      Object.defineProperty(client, PIPELINE, { value: installed, configurable: true });
      pipeline = installed;
    } else if (pipeline.active) {
      return undefined;
    }
    pipeline.active = true;
    return pipeline;
  }

  /** The pipeline of the transaction running on `client`, if the adapter began one. */
  static of(client: object): TransactionPipeline | undefined {
    const pipeline = (client as Record<symbol, TransactionPipeline | undefined>)[PIPELINE];
    return pipeline?.active ? pipeline : undefined;
  }

  /** Ends the transaction's pipeline, before the client returns to the pool: its `query` is pg's again. */
  detach(): void {
    this.active = false;
    this.held = [];
    this.ended = false;
  }

  /**
   * Runs `statement` as the transaction's last, with COMMIT in the same round
   * trip, and ends the transaction: the COMMIT (or ROLLBACK) the transaction's
   * owner sends next is answered here without reaching the server. The caller
   * must have opened the transaction (no outer one it joined) and send nothing
   * after. When the statement fails, the server rolls the COMMIT back.
   */
  async commitWith(text: QueryText, values?: unknown[]): Promise<StatementResult> {
    if (this.ended || !this.idle()) return this.query(text, values);
    const held = this.takeHeld();
    const settled = await this.pipelined([...held, [text, values], ['COMMIT']]);
    this.ended = true;
    const commit = firstFailureOrLast(settled);
    // A transaction aborted before this statement would have failed it too; this is a guard.
    if (commit.command !== 'COMMIT') throw new Error(`the transaction ended with ${commit.command}, not COMMIT`);
    return (settled[settled.length - 2] as PromiseFulfilledResult<QueryResult>).value;
  }

  /** The client's `query` while the transaction runs (TypeORM's runner and the store call it). */
  private query(text: QueryText, values?: unknown[], callback?: unknown): Promise<QueryResult> {
    const sql = typeof text === 'string' ? text : undefined;
    if (this.ended) {
      // The owner's COMMIT, or its ROLLBACK after an error: the transaction is already over.
      if (sql === 'COMMIT' || sql === 'ROLLBACK') return Promise.resolve(unsent(sql));
      return Promise.reject(new Error('the transaction has ended with its last statement; nothing may follow it'));
    }
    if (callback !== undefined || (typeof text === 'object' && typeof (text as { submit?: unknown }).submit === 'function')) {
      return this.sequential([text, values], callback);
    }
    // TypeORM sends these as plain strings; START TRANSACTION comes once, before anything else.
    if (values === undefined) {
      if (sql === START && this.held.length === 0) return this.hold(sql, 'BEGIN');
      if (sql?.startsWith(SET_ISOLATION) && this.held.length > 0) return this.hold(sql, 'SET');
      if ((sql === 'COMMIT' || sql === 'ROLLBACK') && this.held.length > 0) {
        // Nothing ran: the server never saw a transaction, so there is nothing to end.
        this.held = [];
        return Promise.resolve(unsent(sql));
      }
    }
    if (this.held.length === 0) return this.send(text, values);
    if (!this.idle()) return this.sequential([text, values]);
    return this.pipelined([...this.takeHeld(), [text, values]]).then(firstFailureOrLast);
  }

  private hold(sql: string, command: string): Promise<QueryResult> {
    this.held.push(sql);
    return Promise.resolve(unsent(command));
  }

  private takeHeld(): Query[] {
    const held = this.held.map((sql): Query => [sql]);
    this.held = [];
    return held;
  }

  /**
   * Without pipelining (a callback, a cursor, or a client busy with another
   * statement): the held statements are queued first, and node-postgres sends
   * them in order, each in its own round trip.
   */
  private sequential(query: Query, callback?: unknown): Promise<QueryResult> {
    const held = this.takeHeld().map(([sql]) => this.send(sql));
    const [text, values] = query;
    if (callback !== undefined) {
      for (const statement of held) statement.catch(() => undefined); // the statement behind it reports a broken connection
      return this.send(text, values, callback);
    }
    return Promise.allSettled([...held, this.send(text, values)]).then(firstFailureOrLast);
  }

  /** Sends `queries` back to back in one socket write, and waits for every answer. */
  private async pipelined(queries: Query[]): Promise<PromiseSettledResult<QueryResult>[]> {
    const client = this.client;
    client.pipeline = true;
    // Corked: the statements leave in one write (node-postgres corks each one alone).
    const stream = client.connection?.stream as { cork?(): void; uncork?(): void } | undefined;
    stream?.cork?.();
    let answers: Promise<QueryResult>[];
    try {
      answers = queries.map(([text, values]) => this.send(text, values));
    } finally {
      stream?.uncork?.();
    }
    const settled = await Promise.allSettled(answers);
    this.leavePipelineMode();
    return settled;
  }

  private leavePipelineMode(): void {
    if (this.idle()) this.client.pipeline = false;
    else this.client.once('drain', () => this.leavePipelineMode());
  }

  /** Nothing queued or in flight on the client: switching its mode is safe. */
  private idle(): boolean {
    const c = this.client;
    return c.readyForQuery && c._queryQueue.length === 0 && c._sentQueryQueue.length === 0;
  }
}

/**
 * nestjs-cls's transactional adapter for TypeORM with a TransactionPipeline
 * under each top-level transaction: the same options, the same transaction
 * (an EntityManager on one query runner) and the same TransactionHost type as
 * TransactionalAdapterTypeOrm, whose nested transactions (savepoints on the
 * same client) it keeps.
 */
export class PipelinedTransactionalAdapterTypeOrm extends TransactionalAdapterTypeOrm {
  constructor(options: TypeOrmTransactionalAdapterOptions) {
    super(options);
    const stock = this.optionsFactory;
    this.optionsFactory = (dataSource: DataSource) => ({
      ...stock(dataSource),
      wrapWithTransaction: (options, fn, setClient) => runTransaction(dataSource, options?.isolationLevel, fn, setClient),
    });
  }
}

/** What TypeORM's EntityManager.transaction does, with the pipeline attached to the runner's client. */
async function runTransaction<T>(
  dataSource: DataSource,
  isolationLevel: IsolationLevel | undefined,
  fn: () => Promise<T>,
  setClient: (client?: EntityManager) => void,
): Promise<T> {
  const runner = dataSource.createQueryRunner();
  let pipeline: TransactionPipeline | undefined;
  try {
    pipeline = TransactionPipeline.attach((await runner.connect()) as PoolClient);
    await runner.startTransaction(isolationLevel);
    setClient(runner.manager);
    const result = await fn();
    await runner.commitTransaction();
    return result;
  } catch (error) {
    try {
      await runner.rollbackTransaction();
    } catch {
      // The error that ended the transaction is the one to report.
    }
    throw error;
  } finally {
    pipeline?.detach();
    await runner.release();
  }
}
