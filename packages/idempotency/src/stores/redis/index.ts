/**
 * `safe-retries/redis`: the Redis store, for routes whose side effect is not in
 * the app's PostgreSQL (the library's docs/stores.md, "A Redis store"). An app
 * gives it to the module, which loads no Redis code of its own:
 *
 *   IdempotencyModule.forRoot({ stores: { redis: new RedisIdempotencyStore({ url }) } })
 *
 * and the module connects it at startup; code that drives it outside a module
 * (a test, a benchmark) connects one with `RedisIdempotencyStore.create`.
 * ioredis is loaded only when the store connects from a URL.
 */
export { RedisIdempotencyStore } from './redis-idempotency.store';
export type { IdempotencyRedisClient, IdempotencyRedisOptions } from './redis-options';
