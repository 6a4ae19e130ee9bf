import { Inject, Injectable, Logger } from '@nestjs/common';
import { IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions, storeNotGiven } from '../config/idempotency.options';
import { IdempotencyStoreKind, IdempotentOptions } from '../config/module-options';
import { ClaimRequest, ClaimResult, IdempotencyStore, OneCommitKeys } from '../contract/idempotency.store';
import { IdempotencyMetrics } from '../telemetry/idempotency.metrics';
import { inSpan } from '../telemetry/idempotency.telemetry';

/**
 * The provider of the module's PostgreSQL store (PostgresIdempotencyStore),
 * the store of `postgres` routes. A test puts a store of its own in its place
 * with Nest's `overrideProvider` (safe-retries/testing).
 */
export const IDEMPOTENCY_POSTGRES_STORE = Symbol('IDEMPOTENCY_POSTGRES_STORE');

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

const logger = new Logger('Idempotency');

/**
 * A store as the module uses it: each claim, durable or one-commit, timed in
 * `idempotency_claim_duration_seconds` and traced in an `idempotency.claim`
 * span of its own; an announcement of a settled key that fails is logged, never
 * thrown (the waiters ask again at their next slice). The rest is the store's.
 */
function observe(store: IdempotencyStore, metrics: IdempotencyMetrics): IdempotencyStore {
  const timed = (claim: (request: ClaimRequest) => Promise<ClaimResult>) => (request: ClaimRequest) =>
    inSpan('idempotency.claim', async () => {
      const started = process.hrtime.bigint();
      const result = await claim(request);
      metrics.claimDuration.observe(Number(process.hrtime.bigint() - started) / 1e9);
      return result;
    });
  const { recovery, settlement, oneCommit } = store;
  return {
    claim: timed((request) => store.claim(request)),
    complete: (owner, response) => store.complete(owner, response),
    renew: (owner, leaseMs) => store.renew(owner, leaseMs),
    release: (owner) => store.release(owner),
    outcome: (at) => store.outcome(at),
    runUnit: (work) => store.runUnit(work),
    inUnit: () => store.inUnit(),
    recovery,
    settlement: settlement && {
      awaitSettled: (at, timeoutMs) => settlement.awaitSettled(at, timeoutMs),
      announceSettled: (at) =>
        settlement.announceSettled(at).catch((error: unknown) => {
          logger.warn(`could not wake the requests waiting for a key: ${(error as Error).message}`);
        }),
    },
    oneCommit: oneCommit && { claim: timed((request) => oneCommit.claim(request)), complete: (request, response) => oneCommit.complete(request, response) },
  };
}

/**
 * The module's stores, by kind: the PostgreSQL store always, the Redis store
 * when the app gave it (`stores.redis`). A route's store is resolved here, once
 * (IdempotentRoutes, at startup): the one it names or the module's default, as
 * the module uses it for requests (see observe), with whatever optional part of
 * the store contract its options need, or the reason it cannot have it.
 */
@Injectable()
export class IdempotencyStores {
  private readonly byKind: ReadonlyMap<IdempotencyStoreKind, { store: IdempotencyStore; observed: IdempotencyStore }>;

  constructor(
    @Inject(IDEMPOTENCY_POSTGRES_STORE) postgres: IdempotencyStore,
    @Inject(REDIS_STORE) redis: IdempotencyStore | null,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    metrics: IdempotencyMetrics,
  ) {
    const stores: [IdempotencyStoreKind, IdempotencyStore][] = [['postgres', postgres]];
    if (redis) stores.push(['redis', redis]);
    this.byKind = new Map(stores.map(([kind, store]) => [kind, { store, observed: observe(store, metrics) }]));
  }

  /** Every store of the module, the PostgreSQL store first. */
  get all(): IdempotencyStore[] {
    return [...this.byKind.values()].map(({ store }) => store);
  }

  /** The store of this kind (the app's own for `redis`); throws, in one line, when the module has none. */
  of(kind: IdempotencyStoreKind): IdempotencyStore {
    return this.entry(kind).store;
  }

  /** The store of a route with these options, as requests use it; throws, in one line, why it has none that serves them. */
  forRoute(route: IdempotentOptions): IdempotencyStore {
    const kind = route.store ?? this.options.store;
    const { store, observed } = this.entry(kind);
    for (const part of ['recovery', 'settlement', 'oneCommit'] as const) {
      if (NEEDS[part].route(route) && !store[part]) throw new Error(NEEDS[part].missing(kind, this.kindsWith(part)));
    }
    if (route.commit === 'one' && route.phased !== undefined) {
      throw new Error("commit 'one' is for a route whose whole effect is one transaction; a phased route commits in each phase: drop commit or phased");
    }
    return observed;
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

  private entry(kind: IdempotencyStoreKind): { store: IdempotencyStore; observed: IdempotencyStore } {
    const found = this.byKind.get(kind);
    if (!found) throw new Error(storeNotGiven(kind));
    return found;
  }

  private kindsWith(part: 'recovery' | 'settlement' | 'oneCommit'): string {
    return [...this.byKind].flatMap(([kind, { store }]) => (store[part] ? [`'${kind}'`] : [])).join(' or ');
  }
}
