import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { OsUser } from './os-user';

/**
 * The PostgreSQL programs, run as the user PostgreSQL runs as (`ids`; undefined:
 * ourselves), from the binary folder (a cwd that user can always enter).
 *
 * `postgres` is a child of ours rather than a pg_ctl daemon: its output is
 * ours to read (readiness, the log), and its shutdown ours to wait for. A
 * server still running when our process exits is stopped then (pg_ctl,
 * synchronously), and the folders of temporary clusters are removed.
 */
export type Ids = OsUser | undefined;

export const SUPERUSER = 'postgres';
const READY = /database system is ready to accept (read-only )?connections/;
const env = () => ({ ...process.env, LC_ALL: 'C', LANG: 'C' });

/** Runs `program` (as `ids`) to completion; rejects with the tail of its output. */
export function run(bin: string, program: string, args: string[], ids: Ids): Promise<void> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(join(bin, program), args, { ...ids, cwd: bin, env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolveRun() : reject(new Error(`${program} exited with ${code}: ${output.trim().slice(-2_000)}`))));
  });
}

/** A new cluster in `dataDir` whose superuser `postgres` has `password` (scram-sha-256 only). */
export async function initdb(bin: string, dataDir: string, ids: Ids, password: string, durable: boolean): Promise<void> {
  // The password file must be readable by the user initdb runs as, and by nobody else.
  const dir = await mkdtemp(join(tmpdir(), 'dev-postgres-initdb-'));
  const pwFile = join(dir, 'pwfile');
  try {
    await writeFile(pwFile, `${password}\n`, { mode: 0o600 });
    if (ids) {
      await chown(dir, ids.uid, ids.gid);
      await chown(pwFile, ids.uid, ids.gid);
    }
    const args = [`--pgdata=${dataDir}`, `--username=${SUPERUSER}`, `--pwfile=${pwFile}`, '--auth=scram-sha-256', '--encoding=UTF8', '--locale=C', '--no-instructions'];
    await run(bin, 'initdb', durable ? args : [...args, '--no-sync'], ids);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A postmaster left running by a killed parent holds the data folder: stop it. */
export async function stopOrphan(dataDir: string): Promise<void> {
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

export interface Launch {
  bin: string;
  dataDir: string;
  port: number;
  settings: Record<string, string>;
  ids: Ids;
  /** Every chunk of the server's output. */
  log: (text: string) => void;
}

export interface ServerProcess {
  running(): boolean;
  /** The last 64 KB of the server's output. */
  output(): string;
  /** Fast shutdown (sessions ended, data kept); SIGQUIT after 30 s. */
  stop(): Promise<void>;
}

/** Starts `postgres` and resolves once it accepts connections (read-only ones, for a standby). */
export async function launch(options: Launch): Promise<ServerProcess> {
  const { bin, dataDir, port, settings, ids } = options;
  const args = ['-D', dataDir, '-p', String(port), ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
  const server = spawn(join(bin, 'postgres'), args, { ...ids, cwd: bin, env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((r) => server.once('exit', () => r()));
  const running = () => server.exitCode === null && server.signalCode === null;
  let output = '';
  const guard = { bin, dataDir, ids };
  guardOnExit(guard);
  const stop = async () => {
    if (running()) {
      server.kill('SIGINT');
      const timer = setTimeout(() => server.kill('SIGQUIT'), 30_000);
      await exited;
      clearTimeout(timer);
    }
    servers.delete(guard);
  };
  try {
    await new Promise<void>((ready, fail) => {
      const onData = (chunk: Buffer) => {
        const text = chunk.toString('utf8');
        options.log(text);
        output = (output + text).slice(-65_536);
        if (READY.test(output)) ready();
      };
      server.stdout.on('data', onData);
      server.stderr.on('data', onData);
      server.once('error', fail);
      server.once('exit', (code) => fail(new Error(`postgres exited with ${code} before accepting connections: ${output.trim().slice(-4_000)}`)));
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return { running, output: () => output, stop };
}

interface Guard {
  bin: string;
  dataDir: string;
  ids: Ids;
}

/** What the exit hook does: stop the servers of this process still running, then remove the temporary folders. */
const servers = new Set<Guard>();
const folders = new Set<string>();
let hooked = false;

function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.once('exit', () => {
    for (const { bin, dataDir, ids } of servers) {
      const mode = [...folders].some((folder) => dataDir.startsWith(folder)) ? 'immediate' : 'fast';
      try {
        execFileSync(join(bin, 'pg_ctl'), ['-D', dataDir, '-m', mode, '-w', '-t', '10', 'stop'], { ...ids, cwd: bin, env: env(), stdio: 'ignore', timeout: 15_000 });
      } catch {
        // not running any more
      }
    }
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });
}

function guardOnExit(guard: Guard): void {
  hookExit();
  servers.add(guard);
}

/** Removes `folder` when our process exits, until the returned function is called. */
export function removeOnExit(folder: string): () => void {
  hookExit();
  folders.add(folder);
  return () => folders.delete(folder);
}
