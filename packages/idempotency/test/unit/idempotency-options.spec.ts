import { Body, Controller, Module, Post } from '@nestjs/common';
import { IDEMPOTENCY_DEFAULTS, IdempotencyKeys, IdempotencyModuleOptions, Idempotent } from 'safe-retries';
import { IdempotencyStore } from 'safe-retries/testing';
import request from 'supertest';
import { PRINCIPAL_HEADER, createLibraryApp } from '../support/library-app';
import { resolvedOptions as resolveIdempotencyOptions } from '../support/resolved-options';

/** Requests of the timing routes wait here, by key, until the test has seen them in progress. */
const gates = new Map<string, { reached(): void; opened: Promise<void> }>();
/** The handler's work: it tells the test it runs (its key claimed), then waits for the test to let it end. */
const held = async (key: string) => {
  const gate = gates.get(key);
  gate?.reached();
  await gate?.opened;
  return {};
};

@Controller('timing')
class Timing {
  @Post('inherited')
  @Idempotent()
  async inherited(@Body() body: { key: string }) {
    return held(body.key);
  }

  @Post('own-lease')
  @Idempotent({ lease: '2s' })
  async ownLease(@Body() body: { key: string }) {
    return held(body.key);
  }
}

@Module({ controllers: [Timing] })
class TimingModule {}

@Controller('short')
class ShortRetention {
  @Post()
  @Idempotent({ retention: '1s' })
  create() {}
}

@Module({ controllers: [ShortRetention] })
class ShortRetentionModule {}

/**
 * The module's options as IdempotencyModule.forRoot(...) resolves them (the
 * IDEMPOTENCY_OPTIONS an app reads): defaults, durations, lease < retention;
 * options it refuses stop the module's compilation.
 */
describe('idempotency options', () => {
  it('applies the defaults', async () => {
    const o = await resolveIdempotencyOptions({});
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

  it('behind a transaction pooler: LISTEN only on postgres.listenUrl, else waiters poll; unnamed statements unless asked', async () => {
    const postgres = async (given: IdempotencyModuleOptions['postgres']) => (await resolveIdempotencyOptions({ postgres: given })).postgres;
    expect(await postgres({ transactionPooler: true })).toMatchObject({ preparedStatements: false, transactionPooler: true, listen: false });
    expect((await postgres({ transactionPooler: true, preparedStatements: true })).preparedStatements).toBe(true);
    expect((await postgres({ preparedStatements: false })).preparedStatements).toBe(false);
    const listenUrl = 'postgres://app@db:5432/app';
    expect((await postgres({ transactionPooler: true, listenUrl })).listen).toEqual({ url: listenUrl });
    await expect(postgres({ listenUrl: 'db:5432' })).rejects.toThrow('IdempotencyModule: postgres.listenUrl must be a postgres:// or postgresql:// URL');
  });

  it("keeps the PostgreSQL store's settings in postgres, and refuses them at the top level, naming their place", async () => {
    const o = await resolveIdempotencyOptions({ postgres: { tableName: 'billing.keys', claimPoolSize: 3, encryptionKeys: [`k1:${Buffer.alloc(32, 1).toString('base64')}`] } });
    expect(o.postgres).toMatchObject({ table: { name: 'billing.keys' }, claimPoolSize: 3, encryption: [{ id: 'k1' }] });
    await expect(resolveIdempotencyOptions({ tableName: 'keys', encryptionKeys: [] } as IdempotencyModuleOptions)).rejects.toThrow(
      'IdempotencyModule: tableName is postgres.tableName; encryptionKeys is postgres.encryptionKeys',
    );
    await expect(resolveIdempotencyOptions({ redis: { url: 'redis://127.0.0.1:6379' } } as IdempotencyModuleOptions)).rejects.toThrow(
      'IdempotencyModule: redis is stores.redis (new RedisIdempotencyStore(options) from safe-retries/redis)',
    );
    await expect(resolveIdempotencyOptions({ postgres: { encryptionKeys: ['k1:short'] } })).rejects.toThrow(/^IdempotencyModule: postgres.encryptionKeys: /);
  });

  it("refuses store 'redis' as the default when no Redis store is given", async () => {
    await expect(resolveIdempotencyOptions({ store: 'redis' })).rejects.toThrow(
      "IdempotencyModule: store 'redis' needs IdempotencyModule's stores.redis (new RedisIdempotencyStore({ url }) from safe-retries/redis)",
    );
    expect((await resolveIdempotencyOptions({ store: 'redis', stores: { redis: {} as IdempotencyStore } })).store).toBe('redis');
  });

  it('sizes the replay cache, or turns it off', async () => {
    expect((await resolveIdempotencyOptions({ replayCache: { maxBytes: 1_000 } })).replayCacheBytes).toBe(1_000);
    expect((await resolveIdempotencyOptions({ replayCache: { enabled: false, maxBytes: 1_000 } })).replayCacheBytes).toBe(0);
    expect((await resolveIdempotencyOptions({ replayCache: { maxBytes: 0 } })).replayCacheBytes).toBe(0);
  });

  it.each([
    [{ replayCache: { maxBytes: -1 } }, /replayCache.maxBytes must be a whole number of bytes, not -1/],
    [{ replayCache: { maxBytes: 1.5 } }, /replayCache.maxBytes must be a whole number/],
    [{ lease: '1m', retention: '30s' }, /IdempotencyModule: the lease \(1m\) must be shorter than the retention \(30s\)/],
    [{ lease: '25h' }, /the lease \(25h\) must be shorter than the retention \(24h\)/],
    [{ retention: '10s' }, /the lease \(30s\) must be shorter than the retention \(10s\)/],
    [{ lease: 0 }, /IdempotencyModule: the lease must be longer than 0/],
    [{ lease: 'soon' }, /invalid duration "soon"/],
  ])('refuses %j at startup', async (given, error) => {
    await expect(resolveIdempotencyOptions(given)).rejects.toThrow(error);
  });

  it('resolves a route against the module: what the route gives, else the module', async () => {
    // The module's lease 1s and retention 1m; each route's, seen as a key's outcome while its request works and once it ended.
    const lib = await createLibraryApp('express', { idempotency: { lease: '1s', retention: '1m' }, imports: [TimingModule] });
    try {
      const keys = lib.app.get(IdempotencyKeys);
      const timing = async (path: string) => {
        const key = `timing-${path}`;
        let release!: () => void;
        let reached!: () => void;
        const running = new Promise<void>((resolve) => (reached = resolve));
        gates.set(key, { reached, opened: new Promise<void>((resolve) => (release = resolve)) });
        const sent = request(lib.app.getHttpServer()).post(`/timing/${path}`).set(PRINCIPAL_HEADER, 'timing').set('Idempotency-Key', key).send({ key });
        const answered = sent.then((r) => r);
        await running;
        const working = await keys.outcome('timing', key);
        release();
        expect((await answered).status).toBe(201);
        const ended = await keys.outcome('timing', key);
        const [{ now }] = await lib.dataSource.query<{ now: string }[]>('SELECT now()::text AS now');
        if (working.state !== 'in_progress' || ended.state !== 'completed') throw new Error(`unexpected outcomes ${JSON.stringify([working, ended])}`);
        // The lease left (renewed every third of it) and the retention left, on the database clock.
        return { leaseLeftMs: working.retryAfterMs, retentionLeftMs: Date.parse(ended.expiresAt) - Date.parse(now) };
      };
      const inherited = await timing('inherited');
      expect(inherited.leaseLeftMs).toBeGreaterThan(0);
      expect(inherited.leaseLeftMs).toBeLessThanOrEqual(1_000);
      expect(inherited.retentionLeftMs).toBeGreaterThan(55_000);
      expect(inherited.retentionLeftMs).toBeLessThanOrEqual(60_000);
      const own = await timing('own-lease');
      expect(own.leaseLeftMs).toBeGreaterThan(1_000);
      expect(own.leaseLeftMs).toBeLessThanOrEqual(2_000);
      expect(own.retentionLeftMs).toBeGreaterThan(55_000);
      expect(own.retentionLeftMs).toBeLessThanOrEqual(60_000);
    } finally {
      await lib.close();
    }
    await expect(createLibraryApp('express', { idempotency: { lease: '1s', retention: '1m' }, imports: [ShortRetentionModule] })).rejects.toThrow(
      '@Idempotent() on ShortRetention.create: the lease (1s) must be shorter than the retention (1s)',
    );
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

  it('resolves the outbox: no relay without a publisher, its durations checked', async () => {
    const publish = () => Promise.resolve();
    expect((await resolveIdempotencyOptions({})).outbox).toMatchObject({ publish: undefined, enabled: true, leaseMs: 60_000, horizonMs: 3 * 86_400_000, retentionMs: 7 * 86_400_000 });
    expect((await resolveIdempotencyOptions({ outbox: { publish, horizon: '1h' } })).outbox).toMatchObject({ publish, horizonMs: 3_600_000 });
    await expect(resolveIdempotencyOptions({ outbox: { lease: 0 } })).rejects.toThrow('IdempotencyModule: outbox.lease must be longer than 0');
    await expect(resolveIdempotencyOptions({ outbox: { publish: 'https://hooks.example.com' as never } })).rejects.toThrow('outbox.publish must be a function');
  });
});

