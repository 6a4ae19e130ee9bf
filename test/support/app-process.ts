import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { resolve } from 'node:path';
import { assertDistIsCurrent } from './dist';

/**
 * The built service (dist/src/main.js) as a real OS process, for the fault
 * suites that need one: two instances on one database, a SIGKILL mid-request,
 * a database that goes away under a running app. `npm test` builds first; a
 * dist/ older than src/ fails the start with a sentence saying to build (./dist.ts).
 *
 * Every process started here is also killed (SIGKILL) when the jest worker
 * exits, so a failing suite never leaves a server behind.
 */

/** An API client seeded through API_KEYS into every process started here. */
export const PROCESS_CLIENT = { name: 'fault-client', key: 'sk_test_fault_client_0123456789abcdef' };

/** The built entry point; APP_MAIN_JS points the suites at another build (e.g. a mutated copy). */
export const MAIN_JS = resolve(process.env.APP_MAIN_JS ?? resolve(__dirname, '../../dist/src/main.js'));

export interface AppProcessOptions {
  /** The service's environment; DATABASE_URL is required (no embedded database here). */
  env: Record<string, string>;
  /** How long to wait for `GET /health` to answer 200. */
  readyTimeoutMs?: number;
  /** The process's limit of open files (soft and hard, `ulimit -n`); the inherited one otherwise. */
  descriptorLimit?: number;
}

export interface AppProcess {
  url: string;
  port: number;
  pid: number;
  /** Sends a signal (SIGKILL to crash it); does not wait. */
  kill(signal?: NodeJS.Signals): void;
  /** SIGTERM, then waits for the exit (SIGKILL after `timeoutMs`); resolves with the exit code. */
  stop(timeoutMs?: number): Promise<number | null>;
  /** The exit code, or null when a signal ended the process. */
  exited: Promise<number | null>;
  /** Whether the process has exited. */
  hasExited(): boolean;
  /** Everything the process wrote to stdout and stderr so far (the last 256 KB). */
  output(): string;
}

const OUTPUT_LIMIT = 256 * 1024;
const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of live) {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The status of `GET /health`, or undefined when nothing answers. */
function healthStatus(port: number): Promise<number | undefined> {
  return new Promise((resolveStatus) => {
    const req = request({ host: '127.0.0.1', port, path: '/health', method: 'GET', agent: false, timeout: 2_000 }, (res) => {
      res.resume();
      res.on('end', () => resolveStatus(res.statusCode));
      res.on('error', () => resolveStatus(undefined));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolveStatus(undefined));
    req.end();
  });
}

/** Keeps the variables a Node process needs; the service's own come only from `env`. */
function baseEnv(): Record<string, string> {
  const keep = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR', 'SystemRoot', 'NODE_PATH'];
  const env: Record<string, string> = {};
  for (const name of keep) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

/** The port the app reports it bound (main.ts prints it whatever the log level). */
const LISTENING = /"msg":"listening on :(\d+)"/;

async function startOnce(options: AppProcessOptions): Promise<AppProcess> {
  const env = {
    ...baseEnv(),
    API_KEYS: `${PROCESS_CLIENT.name}:${PROCESS_CLIENT.key}`,
    LOG_LEVEL: 'warn',
    RATE_LIMIT_PER_CLIENT: '1000000',
    ...options.env,
    // The OS picks a free port and the app reports it: a port chosen here could be
    // taken by another suite's process before this one binds it, and that process's
    // /health would then answer for this one.
    PORT: '0',
  };
  // `ulimit -n` sets the soft and the hard limit, so Node cannot raise it at startup; `exec` keeps the pid.
  const child =
    options.descriptorLimit === undefined
      ? spawn(process.execPath, [MAIN_JS], { env, stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('/bin/sh', ['-c', `ulimit -n ${options.descriptorLimit} && exec "$0" "$1"`, process.execPath, MAIN_JS], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  installExitHook();
  live.add(child);

  let output = '';
  const append = (chunk: Buffer) => {
    output += chunk.toString('utf8');
    if (output.length > OUTPUT_LIMIT) output = output.slice(-OUTPUT_LIMIT);
  };
  child.stdout!.on('data', append);
  child.stderr!.on('data', append);

  let exitedFlag = false;
  const exited = new Promise<number | null>((resolveExit) => {
    child.once('exit', (code) => {
      exitedFlag = true;
      live.delete(child);
      resolveExit(code);
    });
    child.once('error', (error) => {
      append(Buffer.from(`\n[spawn error] ${error.message}\n`));
      exitedFlag = true;
      live.delete(child);
      resolveExit(null);
    });
  });

  // A guard, not a requirement: a loaded 2-core machine can take well over 30 s to boot two
  // apps at once (loading alone can take 15 s), so the default is 90 s, under the suites' 120 s.
  const deadline = Date.now() + (options.readyTimeoutMs ?? 90_000);
  let port = 0;
  while (!port) {
    if (exitedFlag) {
      const code = await exited;
      throw new AppProcessError(`the app process exited with ${code} before it was ready`, output);
    }
    if (Date.now() >= deadline) {
      child.kill('SIGKILL');
      await exited;
      throw new AppProcessError(`the app did not report its port within ${options.readyTimeoutMs ?? 90_000} ms`, output);
    }
    port = Number(LISTENING.exec(output)?.[1] ?? 0);
    if (!port) await sleep(50);
  }

  const app: AppProcess = {
    url: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid ?? -1,
    kill: (signal: NodeJS.Signals = 'SIGTERM') => {
      if (!exitedFlag) child.kill(signal);
    },
    stop: async (timeoutMs = 15_000) => {
      if (exitedFlag) return exited;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
    exited,
    hasExited: () => exitedFlag,
    output: () => output,
  };

  while (Date.now() < deadline) {
    if (exitedFlag) {
      const code = await exited;
      throw new AppProcessError(`the app process exited with ${code} before it was ready`, output);
    }
    if ((await healthStatus(port)) === 200) return app;
    await sleep(100);
  }
  child.kill('SIGKILL');
  await exited;
  throw new AppProcessError(`GET /health did not answer 200 within ${options.readyTimeoutMs ?? 90_000} ms`, output);
}

export class AppProcessError extends Error {
  constructor(message: string, readonly output: string) {
    super(`${message}\n--- app output ---\n${output.slice(-8_000)}`);
    this.name = 'AppProcessError';
  }
}

/**
 * Spawns `node dist/src/main.js` on a port the OS picks, reads the port from
 * the app's "listening on" line, and waits until its `GET /health` answers 200.
 */
export async function startAppProcess(options: AppProcessOptions): Promise<AppProcess> {
  if (!options.env.DATABASE_URL) throw new Error('startAppProcess: env.DATABASE_URL is required');
  // A mutated copy named by APP_MAIN_JS is deliberately not the current build.
  if (!process.env.APP_MAIN_JS) assertDistIsCurrent();
  if (!existsSync(MAIN_JS)) throw new Error(`${MAIN_JS} is missing: build first (npm run build)`);
  return startOnce(options);
}

/** Stops every given process (SIGTERM, then SIGKILL), ignoring the ones already gone. */
export async function stopAll(apps: (AppProcess | undefined)[]): Promise<void> {
  await Promise.all(apps.map((a) => a?.stop().catch(() => undefined)));
}

/**
 * Starts several processes at once (e.g. two instances booting together on an
 * empty database); every one that came up is added to `apps` for cleanup, then
 * the first failure, if any, is thrown.
 */
export async function startAppProcesses(options: AppProcessOptions[], apps: AppProcess[]): Promise<AppProcess[]> {
  const started = await Promise.allSettled(options.map((o) => startAppProcess(o)));
  const up = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  apps.push(...up);
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
  return up;
}
