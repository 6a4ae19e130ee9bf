import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFile, chmod, chown, copyFile, lstat, mkdir, mkdtemp, readFile, readdir, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { freePort } from '../../src/database/embedded-postgres';
import { postgresBinDir, postgresOsUser } from '../../src/database/postgres-binaries';
import { PostgresServer, createPostgresServer, forgetOnExit, stopOnExit } from './postgres-server';

/**
 * A primary and a real streaming replica of it that applies every commit
 * `applyDelay` after the primary made it (recovery_min_apply_delay), both from
 * the embedded package's PostgreSQL binaries: it has initdb, pg_ctl and
 * postgres but no pg_basebackup, and a machine's own pg_basebackup may be older
 * than the server (a client can only back up a server of its own major version
 * or older). So the replica is made with the low-level backup API:
 * pg_backup_start, a copy of the data folder, pg_backup_stop (its backup_label),
 * then standby.signal and primary_conninfo. A physical replication slot made
 * before the backup keeps the WAL the replica needs until it streams it.
 *
 * As root both run as the `postgres` OS user (createPostgresServer and
 * postgres-binaries.ts); the copy is then handed to that user.
 */
export interface ReplicatedPostgres {
  primary: PostgresServer;
  /** The replica's URL (read-only: a hot standby). */
  replicaUrl(database?: string): string;
  /**
   * Resolves once the replica has applied every commit the primary had made
   * when called (about applyDelay later), rejects after `timeoutMs`.
   */
  caughtUp(timeoutMs?: number): Promise<void>;
  /** Both servers' logs, for a failure message. */
  logs(): Promise<string>;
  destroy(): Promise<void>;
}

const REPLICATION_USER = 'replicator';
const SLOT = 'replica';

/** Left out of the copy: the primary's runtime files, its WAL (streamed instead) and per-server state (PostgreSQL's base backup list). */
const SKIPPED_FILES = new Set(['postmaster.pid', 'postmaster.opts', 'backup_label', 'tablespace_map']);
const EMPTIED_FOLDERS = new Set(['pg_wal', 'pg_replslot', 'pg_dynshmem', 'pg_notify', 'pg_serial', 'pg_snapshots', 'pg_stat_tmp', 'pg_subtrans']);

type Ids = { uid: number; gid: number } | undefined;

/** Copies a live data folder; a file that disappears while copied is skipped (WAL replay recreates what matters). */
async function copyDataFolder(from: string, to: string, ids: Ids, top = true): Promise<void> {
  await mkdir(to, { mode: 0o700 });
  if (ids) await chown(to, ids.uid, ids.gid);
  for (const entry of await readdir(from)) {
    const source = join(from, entry);
    const target = join(to, entry);
    let stat;
    try {
      stat = await lstat(source);
    } catch {
      continue;
    }
    if (top && SKIPPED_FILES.has(entry)) continue;
    if (stat.isDirectory()) {
      if (top && EMPTIED_FOLDERS.has(entry)) {
        await mkdir(target, { mode: 0o700 });
        if (ids) await chown(target, ids.uid, ids.gid);
        if (entry === 'pg_wal') {
          await mkdir(join(target, 'archive_status'), { mode: 0o700 });
          if (ids) await chown(join(target, 'archive_status'), ids.uid, ids.gid);
        }
        continue;
      }
      if (entry === 'pgsql_tmp') continue;
      await copyDataFolder(source, target, ids, false);
    } else if (stat.isSymbolicLink()) {
      await symlink(await readlink(source), target);
    } else {
      try {
        await copyFile(source, target);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw error;
      }
      await chmod(target, stat.mode & 0o777);
      if (ids) await chown(target, ids.uid, ids.gid);
    }
  }
}

async function withClient<T>(url: string, use: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function createReplicatedPostgres(options: { applyDelay: string; databases?: string[] }): Promise<ReplicatedPostgres> {
  const ids = postgresOsUser();
  const bin = postgresBinDir(ids);
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', LANG: 'C' };
  const primary = await createPostgresServer();
  const dir = await mkdtemp(join(tmpdir(), 'safe-retries-replica-'));
  const dataDir = join(dir, 'data');
  const logFile = join(dir, 'postgres.log');
  const port = await freePort();
  const password = randomBytes(12).toString('hex');
  let replicaStarted = false;

  const pgCtl = (args: string[]) =>
    new Promise<void>((resolveRun, reject) => {
      execFile(join(bin, 'pg_ctl'), args, { ...ids, env, cwd: dir, timeout: 90_000 }, (error, stdout, stderr) =>
        error ? reject(new Error(`pg_ctl ${args.join(' ')} failed: ${error.message}\n${stdout}\n${stderr}`)) : resolveRun(),
      );
    });

  const destroy = async () => {
    try {
      if (replicaStarted) await pgCtl(['-D', dataDir, '-m', 'fast', '-w', '-t', '30', 'stop']);
    } finally {
      replicaStarted = false;
      forgetOnExit(dir);
      await rm(dir, { recursive: true, force: true });
      await primary.destroy();
    }
  };

  try {
    if (ids) await chown(dir, ids.uid, ids.gid);
    // wal_level = replica and max_wal_senders are PostgreSQL's defaults; said here so the setup does not depend on them.
    await appendFile(
      join(primary.dataDir, 'postgresql.conf'),
      ['', '# primary of a streaming replica (test/support/replicated-postgres.ts)', 'wal_level = replica', 'max_wal_senders = 4', 'max_replication_slots = 4', ''].join('\n'),
    );
    await appendFile(join(primary.dataDir, 'pg_hba.conf'), `\nhost replication ${REPLICATION_USER} 127.0.0.1/32 scram-sha-256\n`);
    await primary.start();
    await withClient(primary.url(), async (c) => {
      await c.query(`CREATE ROLE ${REPLICATION_USER} WITH LOGIN REPLICATION PASSWORD '${password}'`);
      for (const database of options.databases ?? []) await c.query(`CREATE DATABASE ${c.escapeIdentifier(database)}`);
      // Where caughtUp() leaves its marks (the postgres database: never an app's schema).
      await c.query('CREATE TABLE replication_marks (mark text PRIMARY KEY)');
      await c.query('SELECT pg_create_physical_replication_slot($1, true)', [SLOT]);
    });

    // The low-level base backup: start, copy the folder while the server runs, stop.
    await withClient(primary.url(), async (c) => {
      await c.query(`SELECT pg_backup_start('replica', true)`);
      let stopped = false;
      try {
        await copyDataFolder(primary.dataDir, dataDir, ids);
        const { rows } = await c.query<{ labelfile: string; spcmapfile: string | null }>('SELECT labelfile, spcmapfile FROM pg_backup_stop(false)');
        stopped = true;
        await writeFile(join(dataDir, 'backup_label'), rows[0].labelfile, { mode: 0o600 });
        if (rows[0].spcmapfile) await writeFile(join(dataDir, 'tablespace_map'), rows[0].spcmapfile, { mode: 0o600 });
      } finally {
        if (!stopped) await c.query('SELECT pg_backup_stop(false)').catch(() => undefined);
      }
    });
    await writeFile(join(dataDir, 'standby.signal'), '', { mode: 0o600 });
    await appendFile(
      join(dataDir, 'postgresql.conf'),
      [
        '',
        '# streaming replica (test/support/replicated-postgres.ts)',
        `port = ${port}`,
        `primary_conninfo = 'host=127.0.0.1 port=${primary.port} user=${REPLICATION_USER} password=${password} application_name=replica'`,
        `primary_slot_name = '${SLOT}'`,
        `recovery_min_apply_delay = '${options.applyDelay}'`,
        'hot_standby = on',
        '',
      ].join('\n'),
    );
    if (ids) {
      for (const file of ['backup_label', 'tablespace_map', 'standby.signal']) await chown(join(dataDir, file), ids.uid, ids.gid).catch(() => undefined);
    }
    stopOnExit({ pgCtl: join(bin, 'pg_ctl'), dataDir, dir, ids });
    // -w: returns once the standby is consistent and accepts read-only connections.
    await pgCtl(['-D', dataDir, '-l', logFile, '-w', '-t', '60', 'start']);
    replicaStarted = true;
  } catch (error) {
    const log = await readLogs(primary, logFile);
    await destroy().catch(() => undefined);
    throw new Error(`could not set up the replica: ${(error as Error).message}\n${log}`, { cause: error });
  }

  // The primary's user and password: roles are replicated with everything else.
  const replicaUrl = (database = 'postgres') => {
    const url = new URL(primary.url(database));
    url.port = String(port);
    return url.toString();
  };
  return {
    primary,
    replicaUrl,
    caughtUp: async (timeoutMs = 30_000) => {
      // WAL is applied in order: once the replica shows this mark, it shows every commit made before it.
      const mark = randomBytes(8).toString('hex');
      await withClient(primary.url(), (c) => c.query('INSERT INTO replication_marks (mark) VALUES ($1)', [mark]));
      const deadline = Date.now() + timeoutMs;
      await withClient(replicaUrl(), async (c) => {
        for (;;) {
          const { rowCount } = await c.query('SELECT 1 FROM replication_marks WHERE mark = $1', [mark]);
          if (rowCount) return;
          if (Date.now() > deadline) throw new Error(`the replica did not catch up within ${timeoutMs} ms`);
          await new Promise((r) => setTimeout(r, 50));
        }
      });
    },
    logs: () => readLogs(primary, logFile),
    destroy,
  };
}

async function readLogs(primary: PostgresServer, replicaLog: string): Promise<string> {
  const replica = await readFile(replicaLog, 'utf8').catch(() => '');
  return `--- primary log ---\n${(await primary.log()).slice(-3_000)}\n--- replica log ---\n${replica.slice(-3_000)}`;
}
