import { ChildProcess, execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { readFile, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { builtFile } from '../support/dist';
import { waitFor } from '../support/http-client';

/**
 * The embedded PostgreSQL's credentials and ownership, with the built app and
 * CLI (dist/) on a data folder of this file's own: a new cluster has a random
 * password (file 0600) and refuses `postgres`; a CLI run beside the running app
 * uses its server and leaves it running; a second app on the same folder stops
 * with one line; a cluster whose owner was killed is taken over; a cluster from
 * before password files still starts on the old password, with a warning.
 */
const run = promisify(execFile);
const KEY = 'sk_test_embedded_0123456789abcdef';

interface Started {
  child: ChildProcess;
  port: number;
  pgPort: number;
  output: () => string;
  exited: Promise<number | null>;
}

describe('the embedded PostgreSQL: password and owner (e2e)', () => {
  jest.setTimeout(180_000);
  let dir: string;
  let pgDir: string;
  let env: NodeJS.ProcessEnv;
  const children: ChildProcess[] = [];

  beforeAll(() => {
    builtFile('src/main.js');
    dir = mkdtempSync(join(tmpdir(), 'safe-retries-embedded-'));
    chmodSync(dir, 0o755); // PostgreSQL runs as the postgres user when we are root
    // The embedded PostgreSQL's folder under the working directory, which is `dir` for every process here.
    pgDir = join(dir, '.data', 'postgres');
    env = { ...process.env, PORT: '0', API_KEYS: `embedded:${KEY}`, LOG_LEVEL: 'warn', IDEMPOTENCY_JOBS: 'off' };
    delete env.DATABASE_URL;
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? new Promise((r) => c.once('exit', r)) : undefined)));
    rmSync(dir, { recursive: true, force: true });
  });

  function spawnApp(): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
    const child = spawn(process.execPath, [builtFile('src/main.js')], { env, cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let output = '';
    child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    return { child, output: () => output, exited };
  }

  async function startApp(): Promise<Started> {
    const app = spawnApp();
    const port = await waitFor('the listening line', () => {
      if (app.child.exitCode !== null) throw new Error(`the app exited early:\n${app.output()}`);
      const found = /"msg":"listening on :(\d+)"/.exec(app.output());
      return found ? Number(found[1]) : undefined;
    }, { timeoutMs: 60_000, intervalMs: 100 });
    const pgPort = Number(/127\.0\.0\.1:(\d+)\/safe_retries/.exec(app.output())?.[1]);
    expect(pgPort).toBeGreaterThan(0);
    await waitFor('GET /health 200', async () => ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200 ? true : undefined), { timeoutMs: 30_000, intervalMs: 100 });
    return { ...app, port, pgPort };
  }

  const health = async (app: Started) => (await fetch(`http://127.0.0.1:${app.port}/health`)).status;

  async function connect(pgPort: number, password: string): Promise<Client> {
    const client = new Client({ host: '127.0.0.1', port: pgPort, user: 'postgres', password, database: 'safe_retries' });
    await client.connect();
    return client;
  }

  let first: Started;
  let password: string;

  it('a new cluster gets a random password in a 0600 file; "postgres" is refused', async () => {
    first = await startApp();
    const file = `${pgDir}.password`;
    const stat = statSync(file);
    expect(stat.mode & 0o777).toBe(0o600);
    expect(stat.uid).toBe(process.getuid!());
    password = (await readFile(file, 'utf8')).trim();
    expect(password).toMatch(/^[\w-]{43}$/);
    expect(first.output()).not.toContain(password);

    await expect(connect(first.pgPort, 'postgres')).rejects.toThrow(/password authentication failed/);
    const client = await connect(first.pgPort, password);
    try {
      const { rows } = await client.query<{ method: string }>("SELECT auth_method AS method FROM pg_hba_file_rules WHERE type = 'host'");
      expect(rows.length).toBeGreaterThan(0);
      expect(rows.every((r) => r.method === 'scram-sha-256')).toBe(true);
    } finally {
      await client.end();
    }
  });

  it('a CLI run beside the running app uses its database and leaves it running', async () => {
    const { stdout, stderr } = await run(process.execPath, [builtFile('src/cli/client-create.js'), 'beside-the-app'], { env, cwd: dir, timeout: 60_000 });
    const key = /API key \(shown once, store it now\): (sk_[\w-]{43})/.exec(stdout)?.[1];
    expect(key).toBeDefined();
    expect(await health(first)).toBe(200);
    // The app sees the client the CLI created: one database.
    expect((await fetch(`http://127.0.0.1:${first.port}/orders`, { headers: { Authorization: `Bearer ${key}` } })).status).toBe(200);

    await run(process.execPath, [builtFile('src/cli/purge.js')], { env, cwd: dir, timeout: 60_000 });
    expect(await health(first)).toBe(200);
    expect(first.child.exitCode).toBeNull();
    expect(stderr).toContain(`of the running process ${first.child.pid}`);
  });

  it('a second app on the same data folder exits 1 with one line; the first stays healthy', async () => {
    const second = spawnApp();
    // Bounded: a second app that took the folder over would run on (afterAll stops it).
    const code = await waitFor('the second app to exit', () => second.child.exitCode ?? undefined, { timeoutMs: 30_000, intervalMs: 100 });
    expect(code).toBe(1);
    expect(second.output().trim()).toBe(`another instance is running on this data folder (pid ${first.child.pid}); stop it, or start this one from another folder`);
    expect(await health(first)).toBe(200);
  });

  /** The cluster's folder and its postmaster's pid (the first line of its postmaster.pid), asked of the running server. */
  async function postmasterOf(app: Started): Promise<{ dataDirectory: string; pid: number }> {
    const client = await connect(app.pgPort, password);
    try {
      const [{ data_directory: dataDirectory }] = (await client.query<{ data_directory: string }>('SHOW data_directory')).rows;
      const pid = Number((await readFile(join(dataDirectory, 'postmaster.pid'), 'utf8')).split('\n')[0]);
      expect(pid).toBeGreaterThan(0);
      return { dataDirectory, pid };
    } finally {
      await client.end();
    }
  }

  /** Whether a process runs: signal 0 reaches it (EPERM: it runs as another user) and it is not a zombie. */
  function running(pid: number): boolean {
    try {
      process.kill(pid, 0);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
    }
    const stat = `/proc/${pid}/stat`;
    return !existsSync(stat) || !/^\d+ \(.*\) Z/.test(readFileSync(stat, 'utf8'));
  }

  it('a cluster whose app was killed is taken over (its orphan postmaster stopped)', async () => {
    const orphan = await postmasterOf(first);
    first.child.kill('SIGKILL');
    await first.exited;
    // The postmaster outlives its app: an orphan that still holds the folder.
    expect(running(orphan.pid)).toBe(true);

    first = await startApp();
    expect(running(orphan.pid)).toBe(false);
    // The same cluster, now under a postmaster of the new app's.
    const taken = await postmasterOf(first);
    expect(taken.dataDirectory).toBe(orphan.dataDirectory);
    expect(taken.pid).not.toBe(orphan.pid);
    expect(await health(first)).toBe(200);
  });

  it('a cluster from before password files starts on the old password, with a warning', async () => {
    const client = await connect(first.pgPort, password);
    try {
      await client.query("ALTER USER postgres PASSWORD 'postgres'");
    } finally {
      await client.end();
    }
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    await unlink(`${pgDir}.password`);
    expect(existsSync(`${pgDir}.owner`)).toBe(false);

    first = await startApp();
    expect(first.output()).toMatch(/warning: the embedded PostgreSQL in .* predates password files/);
    expect(await health(first)).toBe(200);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
  });
});
