import { Logger } from '@nestjs/common';
import { Registry } from 'prom-client';
import { IdempotencyModuleOptions } from 'safe-retries';
import { ClaimRequest, ClaimResult, IdempotencyStore, KeySettlement, OneCommitKeys } from 'safe-retries/testing';
import { resolveIdempotencyOptions } from '../../src/config/idempotency.options';
import { IdempotencyStores } from '../../src/stores/idempotency-stores';
import { PostgresIdempotencyStore } from '../../src/stores/postgres/postgres-idempotency.store';
import { IdempotencyMetrics } from '../../src/telemetry/idempotency.metrics';

/**
 * Which store and commit mode a route gets, decided once at startup, and what
 * the module adds to every store it uses (its claims timed, a failed
 * announcement logged): the stores are plain objects, with or without the
 * optional parts, whose claims say which one answered.
 */
describe('IdempotencyStores: a route\'s store and commit mode', () => {
  const request = { scope: 's', key: 'k', id: 'id' } as ClaimRequest;
  const answerOf = (body: string): ClaimResult => ({ kind: 'completed', response: { status: 200, body, contentType: 'text/plain' } });
  const oneCommit = { claim: () => Promise.resolve(answerOf('one-commit')) } as unknown as OneCommitKeys;
  const settlement = { announceSettled: () => Promise.reject(new Error('the listener is gone')) } as unknown as KeySettlement;
  const postgres = { claim: () => Promise.resolve(answerOf('postgres')), recovery: {}, settlement, oneCommit } as unknown as PostgresIdempotencyStore;
  const redis = { claim: () => Promise.resolve(answerOf('redis')) } as unknown as IdempotencyStore;
  let metrics: IdempotencyMetrics;
  const stores = (options: IdempotencyModuleOptions = {}, given: IdempotencyStore | null = redis) =>
    new IdempotencyStores(postgres, given, resolveIdempotencyOptions({ stores: given ? { redis: given } : {}, ...options }), metrics);
  const claims = async () =>
    (await metrics.claimDuration.get()).values.find((v) => (v as { metricName?: string }).metricName === 'idempotency_claim_duration_seconds_count')?.value;

  beforeEach(() => (metrics = new IdempotencyMetrics(new Registry())));

  it("gives a route that asks for commit 'one' its store's one-commit claims", async () => {
    const s = stores();
    const store = s.forRoute({ commit: 'one' });
    expect(await s.oneCommitOf({ commit: 'one' }, store)?.claim(request)).toEqual(answerOf('one-commit'));
    expect(s.oneCommitOf({}, store)).toBeUndefined();
  });

  it("applies the module's commit 'one' to non-phased routes of a store that has it, and to no other", async () => {
    const s = stores({ commit: 'one' });
    const pg: IdempotencyStore = s.forRoute({});
    expect(await s.oneCommitOf({}, pg)?.claim(request)).toEqual(answerOf('one-commit'));
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

  it('refuses at startup, in one line, a route that names a store the module was not given', async () => {
    expect(await stores({}, null).forRoute({}).claim(request)).toEqual(answerOf('postgres'));
    expect(await stores().forRoute({ store: 'redis' }).claim(request)).toEqual(answerOf('redis'));
    expect(stores().of('redis')).toBe(redis);
    expect(() => stores({}, null).forRoute({ store: 'redis' })).toThrow(
      "store 'redis' needs IdempotencyModule's stores.redis (new RedisIdempotencyStore({ url }) from safe-retries/redis)",
    );
  });

  it('times every claim of a store it uses, durable or one-commit, and logs an announcement that fails rather than rejecting', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const store = stores().forRoute({});
      await store.claim(request);
      await store.oneCommit?.claim(request);
      expect(await claims()).toBe(2);
      await expect(store.settlement?.announceSettled(request)).resolves.toBeUndefined();
      expect(warn).toHaveBeenCalledWith('could not wake the requests waiting for a key: the listener is gone');
    } finally {
      warn.mockRestore();
    }
  });

  it('refuses an unknown module commit mode', () => {
    expect(() => resolveIdempotencyOptions({ commit: 'twice' as never })).toThrow('IdempotencyModule: commit must be durable or one, not twice');
  });
});
