import { IdempotencyModuleOptions } from 'safe-retries';
import { IdempotencyStore, OneCommitKeys } from 'safe-retries/testing';
import { resolveIdempotencyOptions } from '../../src/config/idempotency.options';
import { IdempotencyStores } from '../../src/stores/idempotency-stores';
import { PostgresIdempotencyStore } from '../../src/stores/postgres/postgres-idempotency.store';

/**
 * Which store and commit mode a route gets, decided once at startup: only the
 * shapes of the stores matter here (which optional parts they have), so the
 * stores are plain objects with or without them.
 */
describe('IdempotencyStores: a route\'s store and commit mode', () => {
  const oneCommit = {} as OneCommitKeys;
  const postgres = { recovery: {}, settlement: {}, oneCommit } as unknown as PostgresIdempotencyStore;
  const redis = {} as IdempotencyStore;
  const stores = (options: IdempotencyModuleOptions = {}, given: IdempotencyStore | null = redis) =>
    new IdempotencyStores(postgres, given, resolveIdempotencyOptions({ stores: given ? { redis: given } : {}, ...options }));

  it("gives a route that asks for commit 'one' its store's one-commit claims", () => {
    const s = stores();
    const store = s.forRoute({ commit: 'one' });
    expect(s.oneCommitOf({ commit: 'one' }, store)).toBe(oneCommit);
    expect(s.oneCommitOf({}, store)).toBeUndefined();
  });

  it("applies the module's commit 'one' to non-phased routes of a store that has it, and to no other", () => {
    const s = stores({ commit: 'one' });
    const pg: IdempotencyStore = s.forRoute({});
    expect(s.oneCommitOf({}, pg)).toBe(oneCommit);
    expect(s.oneCommitOf({ commit: 'durable' }, pg)).toBeUndefined();
    expect(s.oneCommitOf({ phased: 'op' }, s.forRoute({ phased: 'op' }))).toBeUndefined();
    expect(s.oneCommitOf({ store: 'redis' }, s.forRoute({ store: 'redis' }))).toBeUndefined();
  });

  it("refuses at startup, in one line, commit 'one' on a store without it and on a phased route", () => {
    expect(() => stores().forRoute({ store: 'redis', commit: 'one' })).toThrow(
      "commit 'one' needs a store that claims inside the handler's transaction (the key commits with its writes); the redis store cannot: drop commit or use store 'postgres'",
    );
    expect(() => stores().forRoute({ phased: 'op', commit: 'one' })).toThrow(
      "commit 'one' is for a route whose whole effect is one transaction; a phased route commits in each phase: drop commit or phased",
    );
  });

  it('refuses at startup, in one line, a route that names a store the module was not given', () => {
    expect(stores({}, null).forRoute({})).toBe(postgres);
    expect(() => stores({}, null).forRoute({ store: 'redis' })).toThrow(
      "store 'redis' needs IdempotencyModule's stores.redis (new RedisIdempotencyStore({ url }) from safe-retries/redis)",
    );
  });

  it('refuses an unknown module commit mode', () => {
    expect(() => resolveIdempotencyOptions({ commit: 'twice' as never })).toThrow('IdempotencyModule: commit must be durable or one, not twice');
  });
});
