/**
 * What the Redis store uses of an ioredis client (an ioredis `Redis` is one).
 * Structural, so that the package's types do not need ioredis installed.
 */
export interface IdempotencyRedisClient {
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void;
  quit(): Promise<unknown>;
}

/** The Redis store's connection (exactly one of `url` and `client`) and its keys' prefix: `new RedisIdempotencyStore(options)`. */
export interface IdempotencyRedisOptions {
  /** `redis://[user:password@]host:port[/db]` or `rediss://...`; the store connects when the module starts and quits when it stops. */
  url?: string;
  /** An ioredis client of the app's (it stays the app's: the store never closes it). */
  client?: IdempotencyRedisClient;
  /** Prefix of the Redis keys, each followed by the key's id (keyId). Default `idempotency:`. */
  keyPrefix?: string;
}
