/**
 * `safe-retries/redis`: the Redis store, for routes whose side effect is not in
 * the app's PostgreSQL (the library's README, "A Redis store"). The module
 * builds it from its `redis` option; an app or a test may build one itself
 * (`RedisIdempotencyStore.create`). ioredis is loaded only when the store
 * connects from a URL.
 */
export { RedisIdempotencyStore } from './redis-idempotency.store';
export type { IdempotencyRedisClient, IdempotencyRedisOptions } from '../../config/redis-options';
