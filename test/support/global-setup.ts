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

declare global {
  var __EMBEDDED_PG__: EmbeddedDatabase | undefined;
  var __EMBEDDED_PG_DIR__: string | undefined;
}

export default async function globalSetup(): Promise<void> {
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
