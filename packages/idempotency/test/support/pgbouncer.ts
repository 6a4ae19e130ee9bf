// A real PgBouncer in transaction mode in front of the run's PostgreSQL, for the
// suites that prove the module (test/outbox, test/e2e) or the app (its
// test/e2e/pgbouncer.spec.ts) behind one. It runs
// Debian's `pgbouncer` binary (apt-get install -y pgbouncer; .ci/run installs
// it when missing); without it the suite fails, saying so. Every database of
// the server is reachable through it under its own name (the `*` entry), with
// the server's user and password, so a per-file test database works as is.
//
// As root it runs as the `postgres` OS user (PgBouncer refuses root, like
// PostgreSQL), its folder handed to that user. A PgBouncer still running when
// the jest worker exits is killed and its folder removed.
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { freePort, postgresOsUser } from '@safe-retries/dev-postgres';
import { existsSync, rmSync } from 'node:fs';
import { chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';

export const PGBOUNCER_MISSING = 'The PgBouncer suite needs pgbouncer: apt-get install -y pgbouncer (Debian/Ubuntu; .ci/run installs it)';

export interface PgBouncerOptions {
  /** The server behind it: its host, port, user and password are used (the database is not). */
  serverUrl: string;
  /** Server connections per database and user (default_pool_size). Default 8. */
  poolSize?: number;
  /** Client connections it accepts (max_client_conn). Default 1000. */
  maxClientConn?: number;
}

/** What SHOW POOLS says of one database's pool. */
export interface PoolUse {
  /** Client connections: active (linked to a server connection, or idle between transactions) and waiting for one. */
  clients: number;
  waiting: number;
  /** Server connections open to PostgreSQL, in any state. */
  servers: number;
}

export interface PgBouncer {
  port: number;
  version: string;
  /** `database` through PgBouncer, with the server's user and password. */
  url(database: string): string;
  /** The pool of `database` now. */
  pool(database: string): Promise<PoolUse>;
  /** The largest client and server counts of `database` seen while `work` ran (sampled every 20 ms). */
  peak<T>(database: string, work: () => Promise<T>): Promise<{ result: T; clients: number; servers: number; waiting: number }>;
  /** The application_name of every client connection of `database`. */
  clientNames(database: string): Promise<string[]>;
  /** Its log so far. */
  log(): Promise<string>;
  stop(): Promise<void>;
}

const live = new Map<ChildProcess, string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const [child, dir] of live) {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

/** The binary: on PATH, or where Debian puts it (/usr/sbin is not on every PATH). */
export function pgbouncerBinary(): string | undefined {
  for (const candidate of ['pgbouncer', '/usr/sbin/pgbouncer']) {
    const probe = spawnSync(candidate, ['--version'], { encoding: 'utf8' });
    if (!probe.error && probe.status === 0) return candidate;
  }
  return undefined;
}

/** A value of pgbouncer.ini or its auth file, quoted. */
const quoted = (value: string) => `"${value.replace(/"/g, '""')}"`;

export async function startPgBouncer(options: PgBouncerOptions): Promise<PgBouncer> {
  const binary = pgbouncerBinary();
  if (!binary) throw new Error(PGBOUNCER_MISSING);
  const version = /PgBouncer (\S+)/.exec(spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout)?.[1] ?? 'unknown';
  const server = new URL(options.serverUrl);
  const user = decodeURIComponent(server.username);
  const password = decodeURIComponent(server.password);
  const ids = postgresOsUser();
  const dir = await mkdtemp(join(tmpdir(), 'safe-retries-pgbouncer-'));
  const port = await freePort();
  const logFile = join(dir, 'pgbouncer.log');
  const ini = join(dir, 'pgbouncer.ini');
  const authFile = join(dir, 'userlist.txt');
  try {
    await writeFile(authFile, `${quoted(user)} ${quoted(password)}\n`, { mode: 0o600 });
    await writeFile(
      ini,
      [
        '[databases]',
        // Any database name, on the server behind, under the same name.
        `* = host=${server.hostname} port=${server.port || 5432}`,
        '',
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        'unix_socket_dir =',
        'pool_mode = transaction',
        `default_pool_size = ${options.poolSize ?? 8}`,
        'reserve_pool_size = 0',
        'min_pool_size = 0',
        `max_client_conn = ${options.maxClientConn ?? 1000}`,
        // The server's password, checked as the server would; a server without one: trust.
        `auth_type = ${password ? 'scram-sha-256' : 'trust'}`,
        `auth_file = ${authFile}`,
        `admin_users = ${user}`,
        `logfile = ${logFile}`,
        `pidfile = ${join(dir, 'pgbouncer.pid')}`,
        'log_connections = 0',
        'log_disconnections = 0',
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    if (ids) for (const path of [dir, authFile, ini]) await chown(path, ids.uid, ids.gid);
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }

  const child = spawn(binary, [ini], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], ...(ids ?? {}) });
  installExitHook();
  live.set(child, dir);
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const log = async () => (await readFile(logFile, 'utf8').catch(() => '')) || output;

  const url = (database: string) => {
    const u = new URL(options.serverUrl);
    u.hostname = '127.0.0.1';
    u.port = String(port);
    u.pathname = `/${database}`;
    return u.toString();
  };
  // The admin console answers the simple query protocol only: queries without parameters.
  const admin = async <T>(sql: string): Promise<T[]> => {
    const client = new Client({ connectionString: url('pgbouncer') });
    await client.connect();
    try {
      return (await client.query(sql)).rows as T[];
    } finally {
      await client.end().catch(() => undefined);
    }
  };

  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      live.delete(child);
      const text = await log();
      await rm(dir, { recursive: true, force: true });
      throw new Error(`pgbouncer exited at startup (${child.exitCode ?? child.signalCode}):\n${text}`);
    }
    if (await admin('SHOW VERSION').then(() => true, () => false)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      await exited;
      live.delete(child);
      const text = await log();
      await rm(dir, { recursive: true, force: true });
      throw new Error(`pgbouncer did not answer on port ${port} within 10 s:\n${text}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }

  const pool = async (database: string): Promise<PoolUse> => {
    type Row = Record<string, string | number>;
    const rows = (await admin<Row>('SHOW POOLS')).filter((r) => r.database === database);
    const sum = (columns: string[]) => rows.reduce((n, r) => n + columns.reduce((m, c) => m + Number(r[c] ?? 0), 0), 0);
    return {
      clients: sum(['cl_active', 'cl_waiting']),
      waiting: sum(['cl_waiting']),
      servers: sum(['sv_active', 'sv_idle', 'sv_used', 'sv_tested', 'sv_login']),
    };
  };

  return {
    port,
    version,
    url,
    pool,
    peak: async (database, work) => {
      const peak = { clients: 0, servers: 0, waiting: 0 };
      let running = true;
      const sampler = (async () => {
        while (running) {
          const now = await pool(database).catch(() => undefined);
          if (now) {
            peak.clients = Math.max(peak.clients, now.clients);
            peak.servers = Math.max(peak.servers, now.servers);
            peak.waiting = Math.max(peak.waiting, now.waiting);
          }
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
      try {
        const result = await work();
        return { result, ...peak };
      } finally {
        running = false;
        await sampler;
      }
    },
    clientNames: async (database) =>
      (await admin<{ database: string; application_name: string }>('SHOW CLIENTS')).filter((c) => c.database === database).map((c) => c.application_name),
    log,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      }
      live.delete(child);
      if (existsSync(dir)) await rm(dir, { recursive: true, force: true });
    },
  };
}
