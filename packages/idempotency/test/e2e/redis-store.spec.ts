import { Controller, Module, Post } from '@nestjs/common';
import { Redis } from 'ioredis';
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { Idempotent } from 'safe-retries';
import { RedisIdempotencyStore } from 'safe-retries/redis';
import { idempotencyStoreOf } from 'safe-retries/testing';
import { ContractModule } from '../support/demo/contract.module';
import { keyId } from '../support/keys-table';
import { LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from '../support/library-app';
import { hasRedis, redisUrl } from '../support/test-services';

/**
 * What is particular to the Redis store (the contract both stores keep is
 * idempotency-contract.spec.ts): how keys are named, expired and fenced in
 * Redis, and the startup check that refuses routes needing PostgreSQL.
 */
const describeRedis = hasRedis() ? describe : describe.skip;

describeRedis('Redis store (e2e)', () => {
  let t: LibraryApp;
  let redis: Redis;
  let store: RedisIdempotencyStore;
  const fingerprint = Buffer.alloc(32, 7);

  beforeAll(async () => {
    t = await createLibraryApp('fastify', { imports: [ContractModule.on('redis')], idempotency: { stores: { redis: new RedisIdempotencyStore({ url: redisUrl() }) }, replayCache: { enabled: false } } });
    redis = new Redis(redisUrl());
    store = idempotencyStoreOf(t.app, 'redis').store as RedisIdempotencyStore;
  });
  afterAll(async () => {
    redis?.disconnect();
    await t?.close();
  });

  it('keeps a key as one hash named by keyId, without the key or the scope, for the retention (TTL)', async () => {
    const key = `order-${randomUUID()}`;
    const principal = 'client-a';
    await request(t.app.getHttpServer()).post('/contract/redis/sends').set(PRINCIPAL_HEADER, principal).set('Idempotency-Key', key).send({ name: randomUUID() }).expect(202);
    const name = `idempotency:${keyId(principal, key)}`;
    expect(await redis.type(name)).toBe('hash');
    const fields = await redis.hgetallBuffer(name);
    expect(Object.keys(fields).sort()).toEqual(['b', 'c', 'f', 'o', 's']);
    expect(fields.f).toHaveLength(16); // the fingerprint, as in the PostgreSQL row
    for (const value of Object.values(fields)) expect(value.toString('latin1')).not.toContain(key);
    // Retention 24 h by default, counted from the claim.
    const ttl = await redis.pttl(name);
    expect(ttl).toBeGreaterThan(24 * 3600_000 - 60_000);
    expect(ttl).toBeLessThanOrEqual(24 * 3600_000);
  });

  it('judges the lease on the server clock and makes a strictly larger token on each takeover', async () => {
    const scope = randomUUID();
    const key = randomUUID();
    const claim = { scope, key, id: keyId(scope, key), fingerprint, leaseMs: 30, retentionMs: 60_000 };
    const first = await store.claim(claim);
    if (first.kind !== 'claimed') throw new Error(`expected a claim, got ${first.kind}`);
    expect(await store.claim(claim)).toMatchObject({ kind: 'in_progress' });
    let second = await store.claim(claim);
    while (second.kind === 'in_progress') second = await store.claim(claim);
    if (second.kind !== 'claimed') throw new Error(`expected a takeover, got ${second.kind}`);
    expect(second.takenOver).toBe(true);
    expect(BigInt(second.owner.token)).toBeGreaterThan(BigInt(first.owner.token));

    // The stale owner can neither complete nor release; the newer one can.
    await expect(store.complete(first.owner, { status: 201, body: 'stale', contentType: 'text/plain' })).rejects.toThrow('taken over');
    await store.release(first.owner);
    await store.complete(second.owner, { status: 201, body: 'newer', contentType: 'text/plain' });
    expect(await store.claim(claim)).toMatchObject({ kind: 'completed', response: { status: 201, body: 'newer', contentType: 'text/plain' } });
  });

  it('forgets a key past its retention: the same key is then a new operation', async () => {
    const [scope, key] = [randomUUID(), randomUUID()];
    const claim = { scope, key, id: keyId(scope, key), fingerprint, leaseMs: 10, retentionMs: 200 };
    const first = await store.claim(claim);
    if (first.kind !== 'claimed') throw new Error(`expected a claim, got ${first.kind}`);
    await store.complete(first.owner, { status: 200, body: '{}', contentType: 'application/json; charset=utf-8' });
    const name = store.redisKey(claim);
    const ttl = await redis.pttl(name);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(200);
    // Redis expires it on its own clock; wait for that, not for a guess.
    while ((await redis.exists(name)) === 1) await new Promise((r) => setTimeout(r, 20));
    expect(await store.claim({ ...claim, fingerprint: Buffer.alloc(32, 8) })).toMatchObject({ kind: 'claimed', takenOver: false });
  });
});

describeRedis('IdempotentRoutes: routes that need PostgreSQL refuse the Redis store at startup (e2e)', () => {
  @Controller('guard')
  class PhasedOnRedisController {
    @Post('phased')
    @Idempotent({ store: 'redis', phased: 'guard.phased' })
    phased() {
      return {};
    }
  }
  @Module({ controllers: [PhasedOnRedisController] })
  class PhasedOnRedisModule {}

  @Controller('guard')
  class RedisWithoutRedisController {
    @Post('redis')
    @Idempotent({ store: 'redis' })
    send() {
      return {};
    }
  }
  @Module({ controllers: [RedisWithoutRedisController] })
  class RedisWithoutRedisModule {}

  it('stops the app when a phased route asks for the Redis store, in one line saying why', async () => {
    await expect(createLibraryApp('fastify', { imports: [PhasedOnRedisModule], idempotency: { stores: { redis: new RedisIdempotencyStore({ url: redisUrl() }) } } })).rejects.toThrow(
      "@Idempotent() on PhasedOnRedisController.phased: phased operations need a store with recovery points (they commit with the key in each phase's transaction); the redis store has none: use store 'postgres'",
    );
  });

  it('stops the app when a route asks for the Redis store and the module has none', async () => {
    await expect(createLibraryApp('fastify', { imports: [RedisWithoutRedisModule] })).rejects.toThrow(
      "@Idempotent() on RedisWithoutRedisController.send: store 'redis' needs IdempotencyModule's stores.redis (new RedisIdempotencyStore({ url }) from safe-retries/redis)",
    );
  });
});
