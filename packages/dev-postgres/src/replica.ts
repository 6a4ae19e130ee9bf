import { randomBytes } from 'node:crypto';
import { appendFile, chmod, chown, copyFile, lstat, mkdir, readFile, readdir, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Client } from 'pg';
import { Ids, Launch, ServerProcess, launch } from './server-process';

/**
 * A real streaming replica of a running primary, that applies every commit
 * `applyDelay` after the primary made it (recovery_min_apply_delay). The
 * embedded package's binaries have no pg_basebackup, and a machine's own may be
 * older than the server (a client backs up a server of its own major version
 * or older only), so the replica is made with the low-level backup API
 * (PostgreSQL 15+): pg_backup_start, a copy of the data folder, pg_backup_stop
 * (its backup_label), then standby.signal and primary_conninfo. A physical
 * replication slot made before the backup keeps the WAL the replica needs until
 * it streams it. The copy is made afresh on every start.
 */
const REPLICATION_USER = 'replicator';
const SLOT = 'replica';

/** What the primary needs to feed a replica (PostgreSQL's defaults for the first two, said so the setup does not depend on them). */
export const PRIMARY_SETTINGS = { wal_level: 'replica', max_wal_senders: '4', max_replication_slots: '4' };

/** Left out of the copy: the primary's runtime files, its WAL (streamed instead) and per-server state. */
const SKIPPED_FILES = new Set(['postmaster.pid', 'postmaster.opts', 'backup_label', 'tablespace_map']);
const EMPTIED_FOLDERS = new Set(['pg_wal', 'pg_replslot', 'pg_dynshmem', 'pg_notify', 'pg_serial', 'pg_snapshots', 'pg_stat_tmp', 'pg_subtrans']);

async function ownedDir(path: string, ids: Ids): Promise<void> {
  await mkdir(path, { mode: 0o700 });
  if (ids) await chown(path, ids.uid, ids.gid);
}

/** Copies a live data folder; a file that disappears while copied is skipped (WAL replay recreates what matters). */
async function copyDataFolder(from: string, to: string, ids: Ids, top = true): Promise<void> {
  await ownedDir(to, ids);
  for (const entry of await readdir(from)) {
    const source = join(from, entry);
    const target = join(to, entry);
    const stat = await lstat(source).catch(() => undefined);
    if (!stat || (top && SKIPPED_FILES.has(entry))) continue;
    if (stat.isDirectory()) {
      if (top && EMPTIED_FOLDERS.has(entry)) {
        await ownedDir(target, ids);
        if (entry === 'pg_wal') await ownedDir(join(target, 'archive_status'), ids);
      } else if (entry !== 'pgsql_tmp') {
        await copyDataFolder(source, target, ids, false);
      }
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

/** Lets the replication user in over TCP (before the primary starts: pg_hba.conf is read then). */
export async function allowReplication(dataDir: string): Promise<void> {
  const hba = join(dataDir, 'pg_hba.conf');
  const line = `host replication ${REPLICATION_USER} 127.0.0.1/32 scram-sha-256`;
  if (!(await readFile(hba, 'utf8')).includes(line)) await appendFile(hba, `\n${line}\n`);
}

/** The replication role, the marks table of caughtUp() and a fresh slot, on the primary; returns the role's new password. */
async function prepareOnPrimary(primaryUrl: string): Promise<string> {
  const password = randomBytes(12).toString('hex');
  await withClient(primaryUrl, async (c) => {
    const { rowCount } = await c.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [REPLICATION_USER]);
    await c.query(`${rowCount ? 'ALTER' : 'CREATE'} ROLE ${REPLICATION_USER} WITH LOGIN REPLICATION PASSWORD ${c.escapeLiteral(password)}`);
    // Where caughtUp() leaves its marks (the postgres database: never an app's schema).
    await c.query('CREATE TABLE IF NOT EXISTS replication_marks (mark text PRIMARY KEY)');
    await c.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [SLOT]);
    await c.query('SELECT pg_create_physical_replication_slot($1, true)', [SLOT]);
  });
  return password;
}

/** The low-level base backup: start, copy the folder while the primary runs, stop; the backup label goes into the copy. */
async function baseBackup(primaryUrl: string, primaryDir: string, replicaDir: string, ids: Ids): Promise<void> {
  await rm(replicaDir, { recursive: true, force: true });
  await withClient(primaryUrl, async (c) => {
    await c.query(`SELECT pg_backup_start('replica', true)`);
    let stopped = false;
    try {
      await copyDataFolder(primaryDir, replicaDir, ids);
      const { rows } = await c.query<{ labelfile: string; spcmapfile: string | null }>('SELECT labelfile, spcmapfile FROM pg_backup_stop(false)');
      stopped = true;
      const files: [string, string][] = [['backup_label', rows[0].labelfile], ['standby.signal', '']];
      if (rows[0].spcmapfile) files.push(['tablespace_map', rows[0].spcmapfile]);
      for (const [name, content] of files) {
        await writeFile(join(replicaDir, name), content, { mode: 0o600 });
        if (ids) await chown(join(replicaDir, name), ids.uid, ids.gid);
      }
    } finally {
      if (!stopped) await c.query('SELECT pg_backup_stop(false)').catch(() => undefined);
    }
  });
}

export interface ReplicaSetup {
  /** The primary's superuser URL to its `postgres` database. */
  primaryUrl: string;
  primaryPort: number;
  primaryDir: string;
  replicaDir: string;
  applyDelay: string;
  /** The replica's launch: its port, and the primary's settings (a hot standby needs at least the primary's limits). */
  launch: Omit<Launch, 'dataDir'>;
}

/** Makes the replica from the running primary and starts it; resolves once it accepts read-only connections. */
export async function startReplica(setup: ReplicaSetup): Promise<{ process: ServerProcess; restart(): Promise<ServerProcess> }> {
  const password = await prepareOnPrimary(setup.primaryUrl);
  await baseBackup(setup.primaryUrl, setup.primaryDir, setup.replicaDir, setup.launch.ids);
  const options: Launch = {
    ...setup.launch,
    dataDir: setup.replicaDir,
    settings: {
      ...setup.launch.settings,
      primary_conninfo: `host=127.0.0.1 port=${setup.primaryPort} user=${REPLICATION_USER} password=${password} application_name=replica`,
      primary_slot_name: SLOT,
      recovery_min_apply_delay: setup.applyDelay,
      hot_standby: 'on',
    },
  };
  return { process: await launch(options), restart: () => launch(options) };
}

/**
 * Resolves once the replica has applied every commit the primary had made when
 * called (about the apply delay later). WAL is applied in order: once the
 * replica shows a mark written now, it shows every commit made before it.
 */
export async function caughtUp(primaryUrl: string, replicaUrl: string, timeoutMs: number): Promise<void> {
  const mark = randomBytes(8).toString('hex');
  await withClient(primaryUrl, (c) => c.query('INSERT INTO replication_marks (mark) VALUES ($1)', [mark]));
  const deadline = Date.now() + timeoutMs;
  await withClient(replicaUrl, async (c) => {
    for (;;) {
      const { rowCount } = await c.query('SELECT 1 FROM replication_marks WHERE mark = $1', [mark]);
      if (rowCount) return;
      if (Date.now() > deadline) throw new Error(`the replica did not catch up within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  });
}
