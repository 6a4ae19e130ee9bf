import { Inject, Injectable } from '@nestjs/common';
import { IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions, storeNotGiven } from '../config/idempotency.options';
import { IdempotencyStoreKind, IdempotentOptions } from '../config/module-options';
import { IdempotencyStore, OneCommitKeys } from '../contract/idempotency.store';
import { PostgresIdempotencyStore } from './postgres/postgres-idempotency.store';

/** The Redis store the app gave the module (`stores.redis`), or null. */
export const REDIS_STORE = Symbol('IDEMPOTENCY_REDIS_STORE');

/** What a route may need of its store beyond the contract's core, and why. */
const NEEDS = {
  recovery: {
    route: (o: IdempotentOptions) => o.phased !== undefined,
    missing: (kind: string, others: string) =>
      `phased operations need a store with recovery points (they commit with the key in each phase's transaction); the ${kind} store has none: use store ${others}`,
  },
  settlement: {
    route: (o: IdempotentOptions) => o.wait !== undefined,
    missing: (kind: string, others: string) => `wait needs a store that wakes waiting duplicates (PostgreSQL's LISTEN/NOTIFY); the ${kind} store cannot: drop wait or use store ${others}`,
  },
  oneCommit: {
    route: (o: IdempotentOptions) => o.commit === 'one',
    missing: (kind: string, others: string) =>
      `commit 'one' needs a store that claims inside the handler's transaction (the key commits with its writes); the ${kind} store cannot: drop commit or use store ${others}`,
  },
} as const;

/**
 * The module's stores, by kind: the PostgreSQL store always, the Redis store
 * when the app gave it (`stores.redis`). A route's store is resolved here, once
 * (IdempotentRoutes, at startup): the one it names or the module's default,
 * with whatever optional part of the store contract its options need, or the
 * reason it cannot have it.
 */
@Injectable()
export class IdempotencyStores {
  private readonly byKind: ReadonlyMap<IdempotencyStoreKind, IdempotencyStore>;

  constructor(
    postgres: PostgresIdempotencyStore,
    @Inject(REDIS_STORE) redis: IdempotencyStore | null,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {
    const stores: [IdempotencyStoreKind, IdempotencyStore][] = [['postgres', postgres]];
    if (redis) stores.push(['redis', redis]);
    this.byKind = new Map(stores);
  }

  /** Every store of the module, the PostgreSQL store first. */
  get all(): IdempotencyStore[] {
    return [...this.byKind.values()];
  }

  /** The store of a route with these options; throws, in one line, why it has none that serves them. */
  forRoute(route: IdempotentOptions): IdempotencyStore {
    const kind = route.store ?? this.options.store;
    const store = this.byKind.get(kind);
    if (!store) throw new Error(storeNotGiven(kind));
    for (const part of ['recovery', 'settlement', 'oneCommit'] as const) {
      if (NEEDS[part].route(route) && !store[part]) throw new Error(NEEDS[part].missing(kind, this.kindsWith(part)));
    }
    if (route.commit === 'one' && route.phased !== undefined) {
      throw new Error("commit 'one' is for a route whose whole effect is one transaction; a phased route commits in each phase: drop commit or phased");
    }
    return store;
  }

  /**
   * The one-commit claims of a route of `store` (see `commit`), or none: the
   * route's own `commit`, else the module's where it applies (a non-phased
   * route of a store that has them).
   */
  oneCommitOf(route: IdempotentOptions, store: IdempotencyStore): OneCommitKeys | undefined {
    const mode = route.commit ?? (route.phased === undefined ? this.options.commit : 'durable');
    return mode === 'one' ? store.oneCommit : undefined;
  }

  private kindsWith(part: 'recovery' | 'settlement' | 'oneCommit'): string {
    return [...this.byKind].flatMap(([kind, store]) => (store[part] ? [`'${kind}'`] : [])).join(' or ');
  }
}
