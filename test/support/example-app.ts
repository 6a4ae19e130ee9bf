import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import { createTestDatabase } from './database';
import { REPO_ROOT, assertDistIsCurrent } from './dist';

/**
 * An example app (examples/<name>) run as its users run it: its folder and the shared
 * examples/scripts copied to a temporary folder, its pinned dependencies installed by
 * `npm ci`, and this repository's packages installed from tarballs packed now (not from
 * the sources), by the example's own `npm run install:library`.
 */
export interface Run {
  code: number | null;
  output: string;
}

/** Runs a command with the environment of a fresh shell: no npm_* or jest variables of the outer run. */
export function run(command: string, args: string[], cwd: string, extraEnv: Record<string, string> = {}): Promise<Run> {
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

export function expectSuccess(what: string, r: Run): void {
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}:\n${r.output}`);
}

/** The counts of jest's closing summary in an example's output. */
export function jestSummary(output: string): { failed: number; passed: number; total: number } {
  const tests = /Tests:\s+(?:(\d+) failed, )?(?:\d+ skipped, )?(\d+) passed, (\d+) total/.exec(output);
  if (!tests) throw new Error(`no jest summary in the example's output:\n${output}`);
  return { failed: Number(tests[1] ?? 0), passed: Number(tests[2]), total: Number(tests[3]) };
}

/**
 * Packs `workspaces` (from their built dist/), copies the example into a new temporary
 * folder `work`, and installs it there; the app's folder is `app`. Remove `work` after.
 */
export async function installExample(name: string, workspaces: string[]): Promise<{ work: string; app: string; packDir: string }> {
  assertDistIsCurrent();
  const work = mkdtempSync(join(tmpdir(), `safe-retries-${name}-`));
  const packDir = join(work, 'pack');
  mkdirSync(packDir);
  const pack = ['pack', ...workspaces.flatMap((w) => ['-w', w]), '--ignore-scripts', '--pack-destination', packDir];
  expectSuccess(`npm ${pack.join(' ')}`, await run('npm', pack, REPO_ROOT));

  const examples = join(work, 'examples');
  const outsideBuilds = (src: string) => !/[\\/](node_modules|dist)([\\/]|$)/.test(src.slice(REPO_ROOT.length));
  cpSync(join(REPO_ROOT, 'examples', 'scripts'), join(examples, 'scripts'), { recursive: true });
  const app = join(examples, name);
  cpSync(join(REPO_ROOT, 'examples', name), app, { recursive: true, filter: outsideBuilds });
  expectSuccess('npm ci', await run('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline'], app));
  expectSuccess('install:library', await run('npm', ['run', 'install:library', '--', '--from', packDir], app));
  return { work, app, packDir };
}

/** Where `name` resolves from the example's folder (real path), checked to be outside this repository. */
export async function resolvedFrom(app: string, name: string): Promise<string> {
  const r = await run(process.execPath, ['-p', `require('fs').realpathSync(require.resolve('${name}'))`], app);
  expectSuccess('require.resolve', r);
  const resolved = r.output.trim();
  if (resolved.startsWith(REPO_ROOT + sep)) throw new Error(`${name} resolves into the repository: ${resolved}`);
  return resolved;
}

/**
 * Runs the example's own `npm test` on a fresh database of this run's PostgreSQL (dropped
 * after) and checks that every test passed; answers its output and jest's counts.
 */
export async function runExampleTests(app: string): Promise<{ output: string; passed: number }> {
  const db = await createTestDatabase();
  try {
    const r = await run('npm', ['test'], app, { DATABASE_URL: db.url });
    expectSuccess("the example's npm test", r);
    const tests = jestSummary(r.output);
    if (tests.failed > 0 || tests.passed !== tests.total) throw new Error(`the example's tests did not all pass:\n${r.output}`);
    return { output: r.output, passed: tests.passed };
  } finally {
    await db.drop();
  }
}
