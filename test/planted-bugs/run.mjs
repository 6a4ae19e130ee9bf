#!/usr/bin/env node
/**
 * Planted bugs: each bug of bugs.mjs is applied alone to a copy of the
 * sources, its test files run there, and the run reports which tests caught it.
 *
 * A failure counts as a catch only against a clean run: the named test files
 * run once first on the unmodified copy, and a test that fails there, or a file
 * that does not run at all (no test results: a compile error, a missing build),
 * catches nothing; both are reported. The suites that run the built service
 * (anything importing test/support/dist.ts) need dist/: the copy is built
 * before the clean run and again after each plant whose tests need it, so they
 * run the planted code too. The copy has a node_modules of its own whose
 * workspace links point into the copy (the checkout's would load the
 * checkout's unplanted builds).
 *
 * Every bug must be caught: the run exits 1 if one survives, is not caught
 * (its files did not run, or fail clean), or no longer applies once exactly.
 *
 *   npm run test:planted                     # every bug (15+ minutes)
 *   npm run test:planted -- fingerprint-ignored claims-from-a-replica
 *   node test/planted-bugs/run.mjs --check   # only: each plant applies once, its tests exist
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUGS } from './bugs.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const checkOnly = args.includes('--check');
const only = args.filter((a) => a !== '--check');
const bugs = only.length ? BUGS.filter((b) => only.includes(b.id)) : BUGS;
if (bugs.length === 0) throw new Error(`no planted bug named ${only.join(', ')}; known: ${BUGS.map((b) => b.id).join(', ')}`);

/** Why a bug cannot be planted in the sources under `dir` (its text matches no place, or more than one), or undefined. */
function plantProblem(bug, dir) {
  const text = readFileSync(join(dir, bug.file), 'utf8');
  const at = text.indexOf(bug.find);
  if (at < 0) return 'NO LONGER APPLIES';
  if (text.indexOf(bug.find, at + 1) >= 0) return 'AMBIGUOUS';
  return undefined;
}

/** Whether a test file runs the built service: it reaches test/support/dist.ts through its relative imports. */
function needsDist(testFile, seen = new Set()) {
  const file = resolve(root, testFile);
  if (seen.has(file)) return false;
  seen.add(file);
  if (file === join(root, 'test/support/dist.ts')) return true;
  const source = readFileSync(file, 'utf8');
  for (const [, spec] of source.matchAll(/(?:from|import\()\s*'(\.{1,2}\/[^']+)'/g)) {
    const target = [`${spec}.ts`, join(spec, 'index.ts'), spec].map((s) => resolve(dirname(file), s)).find((p) => existsSync(p) && p.endsWith('.ts'));
    // Only the tests' own helpers: the sources under test never reach dist/.
    if (target && `/${relative(root, target)}`.includes('/test/') && needsDist(target, seen)) return true;
  }
  return false;
}

if (checkOnly) {
  const problems = [];
  const ids = new Set();
  for (const bug of BUGS) {
    if (ids.has(bug.id)) problems.push(`${bug.id}: the id is used twice`);
    ids.add(bug.id);
    const problem = plantProblem(bug, root);
    if (problem) problems.push(`${bug.id}: ${problem} in ${bug.file}`);
    for (const test of bug.tests) if (!existsSync(join(root, test))) problems.push(`${bug.id}: no test file ${test}`);
  }
  const built = BUGS.filter((b) => b.tests.some((t) => existsSync(join(root, t)) && needsDist(t))).map((b) => b.id);
  console.log(problems.length ? problems.join('\n') : `${BUGS.length} planted bugs, each applies once, their test files exist`);
  console.log(`run on a build of the copy: ${built.join(', ') || 'none'}`);
  process.exit(problems.length ? 1 : 0);
}

// The copy: sources and tests; a node_modules linking each of the checkout's
// packages, but the workspaces to the copy's own.
const SKIP = new Set(['node_modules', '.git', 'dist', 'dist-bench', '.pack', 'test-results', 'examples']);
const sandbox = mkdtempSync(join(tmpdir(), 'planted-bugs-'));
chmodSync(sandbox, 0o755); // the embedded PostgreSQL runs as another user when we are root
process.on('exit', () => rmSync(sandbox, { recursive: true, force: true }));
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));
cpSync(root, sandbox, { recursive: true, filter: (src) => src === root || !SKIP.has(basename(src)) });
const workspaces = new Map(
  readdirSync(join(sandbox, 'packages')).flatMap((dir) => {
    const manifest = join(sandbox, 'packages', dir, 'package.json');
    return existsSync(manifest) ? [[JSON.parse(readFileSync(manifest, 'utf8')).name, join(sandbox, 'packages', dir)]] : [];
  }),
);
function linkModules(from, to, scope = '') {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from)) {
    const name = scope ? `${scope}/${entry}` : entry;
    if (entry.startsWith('@') && !scope) linkModules(join(from, entry), join(to, entry), entry);
    else symlinkSync(workspaces.get(name) ?? join(from, entry), join(to, entry));
  }
}
linkModules(join(root, 'node_modules'), join(sandbox, 'node_modules'));

const outcomes = (label, tests) => {
  const report = join(sandbox, `jest-${label}.json`);
  rmSync(report, { force: true });
  spawnSync(process.execPath, ['node_modules/jest/bin/jest.js', '--json', `--outputFile=${report}`, '--silent', ...tests], {
    cwd: sandbox,
    stdio: ['ignore', 'ignore', 'ignore'],
    env: { ...process.env, JEST_SUMMARY_FILE: join(sandbox, 'summary.txt') },
  });
  /** Per test file: whether it ran (has test results), and its tests by name with their status. */
  const files = new Map(tests.map((t) => [t, { ran: false, failed: new Set(), passed: new Set() }]));
  let json;
  try {
    json = JSON.parse(readFileSync(report, 'utf8'));
  } catch {
    return files;
  }
  for (const suite of json.testResults) {
    const file = relative(sandbox, suite.name);
    const seen = { ran: suite.assertionResults.length > 0 && !suite.testExecError, failed: new Set(), passed: new Set() };
    for (const t of suite.assertionResults) (t.status === 'failed' ? seen.failed : seen.passed).add(t.fullName);
    files.set(file, seen);
  }
  return files;
};

const build = () => {
  const r = spawnSync(process.execPath, ['node_modules/typescript/bin/tsc', '-b', 'tsconfig.build.json'], { cwd: sandbox, encoding: 'utf8' });
  return r.status === 0 ? undefined : `${r.stdout}${r.stderr}`.trim().split('\n').slice(0, 5).join(' / ');
};

const results = [];
const planted = [];
for (const bug of bugs) {
  const problem = plantProblem(bug, sandbox);
  if (problem) results.push({ bug, verdict: problem, caughtBy: [], notes: [] });
  else planted.push({ bug, dist: bug.tests.some((t) => needsDist(t)) });
}

// The clean run: every named file once, on the unmodified copy (built first when a file needs it).
const cleanTests = [...new Set(planted.flatMap((p) => p.bug.tests))];
let clean = new Map();
if (planted.length) {
  if (planted.some((p) => p.dist)) {
    process.stdout.write('building the copy (some tests run dist/)\n');
    const failed = build();
    if (failed) throw new Error(`the unmodified copy does not build: ${failed}`);
  }
  process.stdout.write(`clean run: ${cleanTests.join(' ')}\n`);
  clean = outcomes('clean', cleanTests);
  for (const [file, seen] of clean) {
    if (!seen.ran) process.stdout.write(`  clean: ${file} did not run\n`);
    for (const name of seen.failed) process.stdout.write(`  clean: ${file} › ${name} fails without any bug\n`);
  }
}

for (const { bug, dist } of planted) {
  const file = join(sandbox, bug.file);
  const original = readFileSync(file, 'utf8');
  writeFileSync(file, original.replace(bug.find, bug.replace));
  process.stdout.write(`planted ${bug.id} in ${bug.file}; running ${bug.tests.join(' ')}\n`);
  const notes = [];
  const buildFailed = dist ? build() : undefined;
  if (buildFailed) notes.push(`the planted copy does not build: ${buildFailed}`);
  const run = outcomes(bug.id, bug.tests);
  writeFileSync(file, original);
  const caughtBy = [];
  for (const test of bug.tests) {
    const before = clean.get(test);
    const after = run.get(test);
    if (!before?.ran) notes.push(`${test} did not run clean`);
    else if (!after?.ran) notes.push(`${test} did not run with the bug`);
    else {
      for (const name of after.failed) if (before.passed.has(name)) caughtBy.push(`${test} › ${name}`);
      const flaky = [...after.failed].filter((name) => before.failed.has(name));
      if (flaky.length) notes.push(`${test}: ${flaky.length} failing clean too (not counted)`);
    }
  }
  const verdict = caughtBy.length ? 'caught' : notes.some((n) => /did not run|does not build/.test(n)) ? 'NOT RUN' : 'SURVIVED';
  results.push({ bug, verdict, caughtBy, notes });
}

console.log('\n| planted bug | file | verdict | caught by | notes |\n|---|---|---|---|---|');
for (const { bug, verdict, caughtBy, notes } of results) {
  const shown = caughtBy.slice(0, 3).join('<br>') + (caughtBy.length > 3 ? `<br>(+${caughtBy.length - 3} more)` : '');
  console.log(`| ${bug.id}: ${bug.what} | ${bug.file} | ${verdict} | ${shown} | ${notes.join('<br>')} |`);
}
const failed = results.filter((r) => r.verdict !== 'caught');
console.log(`\nplanted: ${results.length - failed.length} caught, ${failed.length} not`);
process.exit(failed.length ? 1 : 0);
