import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { appendFile, chown, mkdtemp, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { freePort } from '../../src/database/embedded-postgres';
import { postgresBinDir, postgresOsUser } from '../../src/database/postgres-binaries';

/**
 * A PostgreSQL server of the test's own, that the test may stop and start (the
 * shared one of the jest run must never go away). It runs the PostgreSQL 18
 * binaries of @embedded-postgres/<platform>-<arch> (initdb, pg_ctl, postgres),
 * even when the run itself uses an external PostgreSQL through DATABASE_URL.
 * As root it runs as the `postgres` OS user, with the binaries where that user
 * can reach them (src/database/postgres-binaries.ts), since PostgreSQL refuses root.
 *
 * Listens on 127.0.0.1 only, no unix socket, fsync off (a throwaway cluster).
 * A server still running when the jest worker exits is stopped (immediate) and
 * its folder removed.
 */
export interface PostgresServer {
  port: number;
  dataDir: string;
  /** postgres://postgres:...@127.0.0.1:port/<database> */
  url(database?: string): string;
  /** Starts the server (pg_ctl start -w) on the same port and data as before. */
  start(): Promise<void>;
  /** Stops it (pg_ctl stop -m fast -w): sessions are terminated, data is kept. */
  stop(): Promise<void>;
  /** Stops it if running and removes its folder. */
  destroy(): Promise<void>;
  isRunning(): boolean;
  createDatabase(name: string): Promise<string>;
  /** The server's log so far. */
  log(): Promise<string>;
}

const USER = 'postgres';

/** A server's folder as the exit hook needs it: stopped (immediate) and removed when the process exits. */
export interface ServerFolder {
  pgCtl: string;
  dataDir: string;
  dir: string;
  ids?: { uid: number; gid: number };
}

const running = new Map<string, ServerFolder>();
let exitHookInstalled = false;

/** Stops and removes this server's folder if the process exits while it is registered. */
export function stopOnExit(folder: ServerFolder): void {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const { pgCtl, dataDir, dir, ids } of running.values()) {
        try {
          execFileSync(pgCtl, ['-D', dataDir, '-m', 'immediate', '-w', 'stop'], { ...ids, stdio: 'ignore', cwd: dir, timeout: 10_000 });
        } catch {
          // not running
        }
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
  running.set(folder.dir, folder);
}

/** The folder is gone (destroyed): nothing left to do at exit. */
export function forgetOnExit(dir: string): void {
  running.delete(dir);
}

export async function createPostgresServer(options: { port?: number } = {}): Promise<PostgresServer> {
  const ids = postgresOsUser();
  const bin = postgresBinDir(ids);
  const dir = await mkdtemp(join(tmpdir(), 'safe-retries-pg-'));
  const dataDir = join(dir, 'data');
  const logFile = join(dir, 'postgres.log');
  const port = options.port ?? (await freePort());
  const password = randomBytes(12).toString('hex');
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', LANG: 'C' };

  const run = (binary: string, args: string[], timeoutMs = 60_000) =>
    new Promise<string>((resolveRun, reject) => {
      execFile(join(bin, binary), args, { ...ids, env, cwd: dir, timeout: timeoutMs }, (error, stdout, stderr) => {
        if (error) reject(new Error(`${binary} ${args.join(' ')} failed: ${error.message}\n${stdout}\n${stderr}`));
        else resolveRun(stdout + stderr);
      });
    });

  let started = false;
  try {
    if (ids) await chown(dir, ids.uid, ids.gid);
    const pwFile = join(dir, 'pwfile');
    await writeFile(pwFile, `${password}\n`, { mode: 0o600 });
    if (ids) await chown(pwFile, ids.uid, ids.gid);
    await run('initdb', [
      `--pgdata=${dataDir}`,
      `--username=${USER}`,
      `--pwfile=${pwFile}`,
      '--auth=scram-sha-256',
      '--encoding=UTF8',
      '--locale=C',
      '--no-sync',
      '--no-instructions',
    ]);
    await unlink(pwFile);
    await appendFile(
      join(dataDir, 'postgresql.conf'),
      [
        '',
        '# test server (test/support/postgres-server.ts)',
        `port = ${port}`,
        `listen_addresses = '127.0.0.1'`,
        `unix_socket_directories = ''`,
        'fsync = off',
        'max_connections = 100',
        '',
      ].join('\n'),
    );
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }

  const server: PostgresServer = {
    port,
    dataDir,
    url: (database = 'postgres') => `postgres://${USER}:${password}@127.0.0.1:${port}/${database}`,
    isRunning: () => started,
    start: async () => {
      if (started) return;
      stopOnExit({ pgCtl: join(bin, 'pg_ctl'), dataDir, dir, ids });
      await run('pg_ctl', ['-D', dataDir, '-l', logFile, '-w', '-t', '30', 'start']);
      started = true;
    },
    stop: async () => {
      if (!started) return;
      await run('pg_ctl', ['-D', dataDir, '-m', 'fast', '-w', '-t', '30', 'stop']);
      started = false;
    },
    destroy: async () => {
      try {
        if (started) await server.stop();
      } finally {
        forgetOnExit(dir);
        await rm(dir, { recursive: true, force: true });
      }
    },
    createDatabase: async (name: string) => {
      const client = new Client({ connectionString: server.url() });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
      } finally {
        await client.end();
      }
      return server.url(name);
    },
    log: () => readFile(logFile, 'utf8').catch(() => ''),
  };
  return server;
}
