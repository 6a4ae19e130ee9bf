import { Controller, Post } from '@nestjs/common';
import { IDEMPOTENCY_DEFAULTS, Idempotent } from 'safe-retries';
import { resolveIdempotencyOptions, resolveTiming } from '../../src/config/idempotency.options';
import { IdempotencyModuleOptions } from '../../src/config/module-options';
import { IdempotencyStore } from '../../src/contract/idempotency.store';

/** The one resolver of the module's options: defaults, durations, lease < retention. */
describe('idempotency options', () => {
  it('applies the defaults', () => {
    const o = resolveIdempotencyOptions({});
    expect(o).toMatchObject({
      leaseMs: 30_000,
      retentionMs: 86_400_000,
      store: 'postgres',
      postgres: { claimPoolSize: IDEMPOTENCY_DEFAULTS.postgres.claimPoolSize, preparedStatements: true, transactionPooler: false, listen: {}, encryption: [] },
      policyUrl: undefined,
      purge: { enabled: true, cron: IDEMPOTENCY_DEFAULTS.purge.cron, batchSize: 5_000, budgetMs: 60_000 },
      recovery: { enabled: true, intervalMs: 60_000, batchSize: 100 },
      replayCacheBytes: 16 * 1024 * 1024,
    });
    expect(o.postgres.table.sql).toBe('"idempotency_keys"');
    expect(o.scope({ client: { id: 'c1' } } as never)).toBe('c1');
  });

  it('behind a transaction pooler: LISTEN only on postgres.listenUrl, else waiters poll; unnamed statements unless asked', () => {
    const postgres = (given: IdempotencyModuleOptions['postgres']) => resolveIdempotencyOptions({ postgres: given }).postgres;
    expect(postgres({ transactionPooler: true })).toMatchObject({ preparedStatements: false, transactionPooler: true, listen: false });
    expect(postgres({ transactionPooler: true, preparedStatements: true }).preparedStatements).toBe(true);
    expect(postgres({ preparedStatements: false }).preparedStatements).toBe(false);
    const listenUrl = 'postgres://app@db:5432/app';
    expect(postgres({ transactionPooler: true, listenUrl }).listen).toEqual({ url: listenUrl });
    expect(() => postgres({ listenUrl: 'db:5432' })).toThrow('IdempotencyModule: postgres.listenUrl must be a postgres:// or postgresql:// URL');
  });

  it("keeps the PostgreSQL store's settings in postgres, and refuses them at the top level, naming their place", () => {
    const o = resolveIdempotencyOptions({ postgres: { tableName: 'billing.keys', claimPoolSize: 3, encryptionKeys: [`k1:${Buffer.alloc(32, 1).toString('base64')}`] } });
    expect(o.postgres).toMatchObject({ table: { name: 'billing.keys' }, claimPoolSize: 3, encryption: [{ id: 'k1' }] });
    expect(() => resolveIdempotencyOptions({ tableName: 'keys', encryptionKeys: [] } as IdempotencyModuleOptions)).toThrow(
      'IdempotencyModule: tableName is postgres.tableName; encryptionKeys is postgres.encryptionKeys',
    );
    expect(() => resolveIdempotencyOptions({ redis: { url: 'redis://127.0.0.1:6379' } } as IdempotencyModuleOptions)).toThrow(
      'IdempotencyModule: redis is stores.redis (new RedisIdempotencyStore(options) from safe-retries/redis)',
    );
    expect(() => resolveIdempotencyOptions({ postgres: { encryptionKeys: ['k1:short'] } })).toThrow(/^IdempotencyModule: postgres.encryptionKeys: /);
  });

  it("refuses store 'redis' as the default when no Redis store is given", () => {
    expect(() => resolveIdempotencyOptions({ store: 'redis' })).toThrow(
      "IdempotencyModule: store 'redis' needs IdempotencyModule's stores.redis (new RedisIdempotencyStore({ url }) from safe-retries/redis)",
    );
    expect(resolveIdempotencyOptions({ store: 'redis', stores: { redis: {} as IdempotencyStore } }).store).toBe('redis');
  });

  it('sizes the replay cache, or turns it off', () => {
    expect(resolveIdempotencyOptions({ replayCache: { maxBytes: 1_000 } }).replayCacheBytes).toBe(1_000);
    expect(resolveIdempotencyOptions({ replayCache: { enabled: false, maxBytes: 1_000 } }).replayCacheBytes).toBe(0);
    expect(resolveIdempotencyOptions({ replayCache: { maxBytes: 0 } }).replayCacheBytes).toBe(0);
  });

  it.each([
    [{ replayCache: { maxBytes: -1 } }, /replayCache.maxBytes must be a whole number of bytes, not -1/],
    [{ replayCache: { maxBytes: 1.5 } }, /replayCache.maxBytes must be a whole number/],
    [{ lease: '1m', retention: '30s' }, /IdempotencyModule: the lease \(1m\) must be shorter than the retention \(30s\)/],
    [{ lease: '25h' }, /the lease \(25h\) must be shorter than the retention \(24h\)/],
    [{ retention: '10s' }, /the lease \(30s\) must be shorter than the retention \(10s\)/],
    [{ lease: 0 }, /IdempotencyModule: the lease must be longer than 0/],
    [{ lease: 'soon' }, /invalid duration "soon"/],
  ])('refuses %j at startup', (given, error) => {
    expect(() => resolveIdempotencyOptions(given)).toThrow(error);
  });

  it('resolves a route against the module: what the route gives, else the module', () => {
    const module = { leaseMs: 1_000, retentionMs: 60_000 };
    expect(resolveTiming({}, module, 'route')).toEqual(module);
    expect(resolveTiming({ lease: '2s' }, module, 'route')).toEqual({ leaseMs: 2_000, retentionMs: 60_000 });
    expect(() => resolveTiming({ retention: '1s' }, module, 'route')).toThrow('route: the lease (1s) must be shorter than the retention (1s)');
  });

  it('checks what a route gives when it is declared', () => {
    const declare = (options: object) => {
      @Controller()
      class C {
        @Post()
        @Idempotent(options)
        create() {}
      }
      return C;
    };
    expect(() => declare({ lease: '2m', retention: '1m' })).toThrow('@Idempotent(): the lease (2m) must be shorter than the retention (1m)');
    expect(() => declare({ lease: '0ms' })).toThrow('@Idempotent(): the lease must be longer than 0');
    expect(() => declare({ lease: '2m' })).not.toThrow();
  });

  it('resolves the outbox: no relay without a publisher, its durations checked', () => {
    const publish = () => Promise.resolve();
    expect(resolveIdempotencyOptions({}).outbox).toMatchObject({ publish: undefined, enabled: true, leaseMs: 60_000, horizonMs: 3 * 86_400_000, retentionMs: 7 * 86_400_000 });
    expect(resolveIdempotencyOptions({ outbox: { publish, horizon: '1h' } }).outbox).toMatchObject({ publish, horizonMs: 3_600_000 });
    expect(() => resolveIdempotencyOptions({ outbox: { lease: 0 } })).toThrow('IdempotencyModule: outbox.lease must be longer than 0');
    expect(() => resolveIdempotencyOptions({ outbox: { publish: 'https://hooks.example.com' as never } })).toThrow('outbox.publish must be a function');
  });
});

