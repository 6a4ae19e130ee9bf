import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';

/**
 * The files beside a data folder.
 *
 * `<data folder>.owner` names the process that started the server (pid, port),
 * created exclusively before the server starts. A second start finds a live
 * owner and either attaches to its server (then never stops it) or refuses.
 * Only a postmaster whose owner is gone is an orphan, and only an orphan is
 * stopped.
 *
 * `<data folder>.password`: a new cluster's random password (256 bits), mode
 * 0600, owned by the user running Node (e.g. root: the postgres OS user never
 * needs it). A cluster made before password files (password `postgres`, no
 * such file) keeps working on that password, with a warning to reset it.
 */

/** The password of clusters made before the password file existed. */
export const LEGACY_PASSWORD = 'postgres';

/** The file holding the cluster's password, beside its data folder. */
export const passwordFileFor = (dataDir: string) => `${resolve(dataDir)}.password`;
/** The file naming the process that runs the cluster, beside its data folder. */
export const ownerFileFor = (dataDir: string) => `${resolve(dataDir)}.owner`;

/** Another live process runs the server on this data folder (and we may not attach). */
export class PostgresBusyError extends Error {
  override name = 'PostgresBusyError';
  constructor(readonly ownerPid: number) {
    super(`another instance is running on this data folder (pid ${ownerPid})`);
  }
}

export interface Owner {
  pid: number;
  port: number;
}

/** Whether `pid` is a live process other than ourselves (a restarted container reuses its pid). */
export function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function readOwner(file: string): Owner | undefined {
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
export async function claim(file: string, port: number): Promise<Owner | undefined> {
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

export function release(file: string): void {
  if (readOwner(file)?.pid === process.pid) rmSync(file, { force: true });
}

/** Writes a new random password beside the data folder (0600, ours), atomically. */
export function createPassword(file: string): string {
  const password = randomBytes(32).toString('base64url');
  const staging = `${file}.tmp-${process.pid}`;
  writeFileSync(staging, `${password}\n`, { mode: 0o600 });
  renameSync(staging, file);
  return password;
}

/** The cluster's password, or the legacy one (with a warning) for a cluster that predates the file. */
export function readPassword(file: string, warn: (message: string) => void): string {
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  warn(
    `warning: the embedded PostgreSQL in ${file.replace(/\.password$/, '')} predates password files and still uses the well-known password "postgres": ` +
      `reset it (stop the app, remove the data folder) or set DATABASE_URL`,
  );
  return LEGACY_PASSWORD;
}
