import { Controller, Post } from '@nestjs/common';
import { IDEMPOTENCY_DEFAULTS, Idempotent } from 'safe-retries';
import { resolveIdempotencyOptions, resolveTiming } from '../../src/config/idempotency.options';

/** The one resolver of the module's options: defaults, durations, lease < retention. */
describe('idempotency options', () => {
  it('applies the defaults', () => {
    const o = resolveIdempotencyOptions({});
    expect(o).toMatchObject({
      leaseMs: 30_000,
      retentionMs: 86_400_000,
      claimPoolSize: IDEMPOTENCY_DEFAULTS.claimPoolSize,
      policyUrl: undefined,
      purge: { enabled: true, cron: IDEMPOTENCY_DEFAULTS.purge.cron, batchSize: 5_000, budgetMs: 60_000 },
      recovery: { enabled: true, intervalMs: 60_000, batchSize: 100 },
      replayCacheBytes: 16 * 1024 * 1024,
    });
    expect(o.table.sql).toBe('"idempotency_keys"');
    expect(o.scope({ client: { id: 'c1' } } as never)).toBe('c1');
  });

  it('behind a transaction pooler: LISTEN only on listenUrl, else waiters poll; unnamed statements unless asked', () => {
    expect(resolveIdempotencyOptions({})).toMatchObject({ preparedStatements: true, transactionPooler: false, listen: {} });
    expect(resolveIdempotencyOptions({ transactionPooler: true })).toMatchObject({
      preparedStatements: false,
      transactionPooler: true,
      listen: false,
    });
    expect(resolveIdempotencyOptions({ transactionPooler: true, preparedStatements: true }).preparedStatements).toBe(true);
    expect(resolveIdempotencyOptions({ preparedStatements: false }).preparedStatements).toBe(false);
    const listenUrl = 'postgres://app@db:5432/app';
    expect(resolveIdempotencyOptions({ transactionPooler: true, listenUrl }).listen).toEqual({ url: listenUrl });
    expect(() => resolveIdempotencyOptions({ listenUrl: 'db:5432' })).toThrow('IdempotencyModule: listenUrl must be a postgres:// or postgresql:// URL');
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

