// One PostgreSQL for the whole jest run. With DATABASE_URL set (e.g. an external
// PostgreSQL 15) it is used as the admin connection; otherwise the app's own
// embedded PostgreSQL (src/database/embedded-postgres.ts, so a root run in a
// private checkout works here as in `npm start`) starts in a temporary folder.
// Each test file then creates a fresh database of its own (test/support/database.ts)
// and the app migrates it on boot. jest transforms this file like the suites.
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddedDatabase, startEmbeddedPostgres } from '../../src/database/embedded-postgres';
import { TestRedis, startRedisServer } from './redis-server';

declare global {
  var __EMBEDDED_PG__: EmbeddedDatabase | undefined;
  var __EMBEDDED_PG_DIR__: string | undefined;
  var __TEST_REDIS__: TestRedis | undefined;
}

export default async function globalSetup(): Promise<void> {
  await setUpRedis();
  if (process.env.DATABASE_URL) {
    process.env.TEST_ADMIN_DATABASE_URL = process.env.DATABASE_URL;
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), 'safe-retries-test-'));
  // Lets the postgres OS user (as whom PostgreSQL runs when we are root) reach the data folder.
  await chmod(dir, 0o755);
  try {
    const pg = await startEmbeddedPostgres({
      dataDir: join(dir, 'data'),
      database: 'postgres',
      ephemeral: true,
      // A throwaway cluster: durability buys nothing here, speed does.
      settings: { max_connections: '300', fsync: 'off' },
    });
    globalThis.__EMBEDDED_PG__ = pg;
    globalThis.__EMBEDDED_PG_DIR__ = dir;
    process.env.TEST_ADMIN_DATABASE_URL = pg.url;
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
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
