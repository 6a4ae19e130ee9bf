// One PostgreSQL for the whole jest run. With DATABASE_URL set (e.g. an external
// PostgreSQL 15) it is used as the admin connection; otherwise a temporary
// PostgreSQL of @safe-retries/dev-postgres (the one the app's development mode
// uses, so a root run in a private checkout works here as in `npm start`) starts
// and globalTeardown removes it. Each test file then creates a fresh database of
// its own (test/support/database.ts) and the app migrates it on boot. jest
// transforms this file like the suites but loads it with Node's resolver, outside
// its moduleNameMapper: the package's sources are reached by path, so a plain
// `npx jest` needs no build.
import { DevPostgres, startPostgres } from '../../packages/dev-postgres/src';
import { TestRedis, startRedisServer } from './redis-server';

declare global {
  var __TEST_POSTGRES__: DevPostgres | undefined;
  var __TEST_REDIS__: TestRedis | undefined;
}

export default async function globalSetup(): Promise<void> {
  await setUpRedis();
  if (process.env.DATABASE_URL) {
    process.env.TEST_ADMIN_DATABASE_URL = process.env.DATABASE_URL;
    return;
  }
  // Temporary, so fsync is off: durability buys nothing here, speed does.
  const pg = await startPostgres({ settings: { max_connections: '300' } });
  globalThis.__TEST_POSTGRES__ = pg;
  process.env.TEST_ADMIN_DATABASE_URL = pg.url();
}

/**
 * The run's Redis (test/support/redis-server.ts): REDIS_URL when set, else a
 * redis-server of its own; the workers inherit its URL as TEST_REDIS_URL. Without one, only the
 * Redis suites fail, saying how to install it (TEST_REDIS_ERROR says why).
 */
async function setUpRedis(): Promise<void> {
  // Under its own name, as TEST_ADMIN_DATABASE_URL: apps the suites spawn do not inherit a Redis.
  if (process.env.REDIS_URL) {
    process.env.TEST_REDIS_URL = process.env.REDIS_URL;
    return;
  }
  const started = await startRedisServer();
  if ('missing' in started) {
    process.env.TEST_REDIS_ERROR = started.missing;
    return;
  }
  globalThis.__TEST_REDIS__ = started;
  process.env.TEST_REDIS_URL = started.url;
}
