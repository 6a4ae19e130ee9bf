import { randomUUID } from 'node:crypto';
import { RedisIdempotencyStore } from 'safe-retries/redis';
import { describeStoreContract } from 'safe-retries/testing';
import { hasRedis, redisUrl } from '../support/test-services';

// The Redis store keeps the core of the contract; it has no recovery points and
// cannot wake waiting duplicates (routes that need them are refused at startup).
describeStoreContract(
  'Redis',
  async () => {
    const store = await RedisIdempotencyStore.create({ url: redisUrl(), keyPrefix: `contract-${randomUUID()}:` });
    return { store, close: () => store.onModuleDestroy() };
  },
  { runner: { describe: hasRedis() ? describe : describe.skip, it, beforeAll, afterAll } },
);
