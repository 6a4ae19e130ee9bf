import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import { TestDatabase, createTestDatabase } from '../support/database';
import { REPO_ROOT, assertDistIsCurrent } from '../support/dist';

/**
 * Proof the library installs: pack the library's workspace (packages/idempotency, `safe-retries`),
 * copy examples/fastify-ledger to a temporary folder, `npm ci` its pinned dependencies there,
 * install the tarball (not the repository's sources), and run the example's own `npm test`
 * (type check against the package's .d.ts, then its jest suite with the 50-request race) on
 * a fresh database of this run's PostgreSQL.
 */
jest.setTimeout(10 * 60_000);

interface Run {
  code: number | null;
  output: string;
}

/** Runs a command with the environment of a fresh shell: no npm_* or jest variables of the outer run. */
function run(command: string, args: string[], cwd: string, extraEnv: Record<string, string> = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(npm_|JEST_|NODE_OPTIONS$|INIT_CWD$)/i.test(k)) env[k] = v;
  }
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: { ...env, CI: 'true', FORCE_COLOR: '0', ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

function expectSuccess(what: string, r: Run): void {
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}:\n${r.output}`);
}

describe('the example app against the packed package (examples/fastify-ledger)', () => {
  let work: string;
  let app: string;
  let tgz: string;
  let db: TestDatabase | undefined;

  beforeAll(async () => {
    assertDistIsCurrent();
    work = mkdtempSync(join(tmpdir(), 'safe-retries-example-'));
    const packDir = join(work, 'pack');
    mkdirSync(packDir);
    expectSuccess('npm pack -w safe-retries', await run('npm', ['pack', '-w', 'safe-retries', '--ignore-scripts', '--pack-destination', packDir], REPO_ROOT));
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, 'packages', 'idempotency', 'package.json'), 'utf8')) as { version: string };
    tgz = join(packDir, `safe-retries-${version}.tgz`);
    expect(tgz).toMatch(/safe-retries-\d+\.\d+\.\d+.*\.tgz$/);

    app = join(work, 'fastify-ledger');
    cpSync(join(REPO_ROOT, 'examples', 'fastify-ledger'), app, {
      recursive: true,
      filter: (src) => !/[\\/](node_modules|dist)([\\/]|$)/.test(src.slice(REPO_ROOT.length)),
    });
    expectSuccess('npm ci', await run('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline'], app));
    expectSuccess('install-library', await run('npm', ['run', 'install:library', '--', tgz], app));
  });

  afterAll(async () => {
    await db?.drop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('installs safe-retries from the tarball into the example, not from the repository', async () => {
    const r = await run(process.execPath, ['-p', "require('fs').realpathSync(require.resolve('safe-retries'))"], app);
    expectSuccess('require.resolve', r);
    const resolved = r.output.trim();
    expect(resolved).toBe(join(realpathSync(app), 'node_modules', 'safe-retries', 'dist', 'index.js'));
    expect(resolved.startsWith(REPO_ROOT + sep)).toBe(false);
    const manifest = await run(process.execPath, ['-p', "JSON.stringify(require('safe-retries/package.json'))"], app);
    expect(JSON.parse(manifest.output)).toMatchObject({ name: 'safe-retries', main: './dist/index.js', types: './dist/index.d.ts' });
  });

  it("passes the example's own npm test (type check, then the race on Fastify with acct_ principals)", async () => {
    db = await createTestDatabase();
    const r = await run('npm', ['test'], app, { DATABASE_URL: db.url });
    expectSuccess("the example's npm test", r);
    const tests = /Tests:\s+(?:(\d+) failed, )?(?:\d+ skipped, )?(\d+) passed, (\d+) total/.exec(r.output);
    if (!tests) throw new Error(`no jest summary in the example's output:\n${r.output}`);
    expect({ failed: Number(tests[1] ?? 0), passed: Number(tests[2]) }).toEqual({ failed: 0, passed: Number(tests[3]) });
    expect(Number(tests[2])).toBeGreaterThanOrEqual(8);
    expect(r.output).toMatch(/✓ writes one row for 50 identical requests at once/);
  });
});
