import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsService } from 'nestjs-cls';
import type { BeforeQueryEvent } from 'typeorm';
import { DataSource, EntitySubscriberInterface } from 'typeorm';
import { IdempotencyContext } from './idempotency.context';
import { IdempotencyProblem, idempotencyErrors } from '../contract/idempotency.errors';
import { RouteWarnings } from './route-warnings';
import { IDEMPOTENCY_CLS, IDEMPOTENCY_OPTIONS, IDEMPOTENCY_TX_HOST, ResolvedIdempotencyOptions } from '../config/idempotency.options';

/**
 * No write escapes a key's transaction. While a unit of an `@Idempotent()`
 * route runs (the handler with its completion, a phase, a finish), its writes
 * must go through that unit's transaction (`TransactionHost.tx`, or a
 * transaction the code opens itself through TransactionHost): a repository or
 * manager of the data source (`@InjectRepository()`, `@InjectEntityManager()`,
 * `dataSource.getRepository()`, `dataSource.manager`, `dataSource.query()`)
 * takes a connection of its own and would commit on its own, so its rows would
 * survive a rollback of the key and a retry would write them again.
 *
 * A TypeORM subscriber sees every statement of the data source before it is
 * sent (`beforeQuery`, registered the way Nest's TypeORM guide registers
 * one). A statement that may write, on a query runner other than that of the
 * transaction TransactionHost holds (the unit's, or one the code opened
 * through TransactionHost, e.g. `Propagation.RequiresNew`), is refused: its query
 * rejects with a 500 problem that names no internals (the server's log names
 * the route and the fix, once per route), and the unit
 * fails and rolls back even if the code caught that rejection. Reads (SELECT,
 * SHOW, EXPLAIN, and transaction control) pass: a read outside the
 * transaction loses nothing. Statements sent on a driver's client directly
 * (not through TypeORM) are not seen.
 */
@Injectable()
export class KeyTransactionWrites implements EntitySubscriberInterface {
  private readonly warnings = new RouteWarnings();

  constructor(
    @InjectDataSource() dataSource: DataSource,
    @Inject(IDEMPOTENCY_CLS) private readonly cls: ClsService,
    @Inject(IDEMPOTENCY_TX_HOST) private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly context: IdempotencyContext,
  ) {
    dataSource.subscribers.push(this);
  }

  /** Runs a unit's work (inside its transaction): only that transaction may write. */
  async within<T>(work: () => Promise<T>): Promise<T> {
    const unit: Unit = {};
    this.cls.set(UNIT, unit);
    try {
      const value = await work();
      if (unit.refused) throw unit.refused;
      return value;
    } finally {
      this.cls.set(UNIT, undefined);
    }
  }

  beforeQuery(event: BeforeQueryEvent): void {
    if (!this.cls.isActive()) return;
    const unit = this.cls.get<Unit | undefined>(UNIT);
    if (unit === undefined || !mayWrite(event.query)) return;
    if (this.txHost.isTransactionActive() && event.queryRunner === this.txHost.tx.queryRunner) return;
    unit.refused ??= this.refusal(this.context.operation ?? 'An @Idempotent() operation');
    throw unit.refused;
  }

  private refusal(route: string): IdempotencyProblem {
    this.warnings.once(
      'write',
      route,
      'wrote through a connection of its own (a repository or manager of the DataSource: @InjectRepository(), ' +
        '@InjectEntityManager(), dataSource.getRepository(), dataSource.manager, dataSource.query()), which would commit ' +
        'without its Idempotency-Key; the request was answered 500 idempotency_write_outside_transaction and nothing was committed. ' +
        'Write through the transaction: inject TransactionHost<TransactionalAdapterTypeOrm> and use txHost.tx.getRepository(Entity), txHost.tx.query(...)',
    );
    return idempotencyErrors.writeOutsideTransaction(this.options.policyUrl);
  }
}

const UNIT = Symbol('idempotency.unit');

interface Unit {
  refused?: IdempotencyProblem;
}

/** Statements that cannot write (a data-modifying WITH is a write). */
const READ = /^\s*(?:select|show|explain|values|table|start transaction|begin|commit|rollback|savepoint|release savepoint|set)\b/i;
const WRITE_IN_WITH = /\b(?:insert|update|delete|merge)\b/i;

function mayWrite(query: string): boolean {
  if (READ.test(query)) return false;
  return !/^\s*with\b/i.test(query) || WRITE_IN_WITH.test(query);
}
