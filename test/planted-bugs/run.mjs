#!/usr/bin/env node
/**
 * Planted bugs: each bug of bugs.mjs is applied alone to a copy of the
 * sources, its test files run there (jest compiles the sources, so no build is
 * needed), and the run reports which tests caught it. Every bug must be caught:
 * the run exits 1 if one survives or no longer applies.
 *
 *   npm run test:planted                     # every bug
 *   npm run test:planted -- fingerprint-ignored claims-from-a-replica
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUGS } from './bugs.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const only = process.argv.slice(2);
const bugs = only.length ? BUGS.filter((b) => only.includes(b.id)) : BUGS;
if (bugs.length === 0) throw new Error(`no planted bug named ${only.join(', ')}; known: ${BUGS.map((b) => b.id).join(', ')}`);

// The copy: sources and tests, the checkout's node_modules linked in.
const SKIP = new Set(['node_modules', '.git', 'dist', 'dist-bench', '.pack', 'test-results', 'examples']);
const sandbox = mkdtempSync(join(tmpdir(), 'planted-bugs-'));
chmodSync(sandbox, 0o755); // the embedded PostgreSQL runs as another user when we are root
process.on('exit', () => rmSync(sandbox, { recursive: true, force: true }));
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));
cpSync(root, sandbox, { recursive: true, filter: (src) => src === root || !SKIP.has(basename(src)) });
symlinkSync(join(root, 'node_modules'), join(sandbox, 'node_modules'));

const results = [];
for (const bug of bugs) {
  const file = join(sandbox, bug.file);
  const original = readFileSync(file, 'utf8');
  const at = original.indexOf(bug.find);
  if (at < 0 || original.indexOf(bug.find, at + 1) >= 0) {
    results.push({ bug, verdict: at < 0 ? 'NO LONGER APPLIES' : 'AMBIGUOUS', caughtBy: [] });
    continue;
  }
  writeFileSync(file, original.replace(bug.find, bug.replace));
  const report = join(sandbox, `jest-${bug.id}.json`);
  process.stdout.write(`planted ${bug.id} in ${bug.file}; running ${bug.tests.join(' ')}\n`);
  spawnSync(process.execPath, ['node_modules/jest/bin/jest.js', '--json', `--outputFile=${report}`, '--silent', ...bug.tests], {
    cwd: sandbox,
    stdio: ['ignore', 'ignore', 'ignore'],
    env: { ...process.env, JEST_SUMMARY_FILE: join(sandbox, 'summary.txt') },
  });
  writeFileSync(file, original);
  let caughtBy = [];
  try {
    const outcome = JSON.parse(readFileSync(report, 'utf8'));
    caughtBy = outcome.testResults.flatMap((suite) =>
      suite.status === 'failed'
        ? suite.assertionResults.filter((t) => t.status === 'failed').map((t) => `${suite.name.slice(sandbox.length + 1)} › ${t.fullName}`).concat(suite.assertionResults.length ? [] : [`${suite.name.slice(sandbox.length + 1)} (the file failed to run)`])
        : [],
    );
  } catch {
    caughtBy = [];
  }
  results.push({ bug, verdict: caughtBy.length ? 'caught' : 'SURVIVED', caughtBy });
}

console.log('\n| planted bug | file | verdict | caught by |\n|---|---|---|---|');
for (const { bug, verdict, caughtBy } of results) {
  const shown = caughtBy.slice(0, 3).join('<br>') + (caughtBy.length > 3 ? `<br>(+${caughtBy.length - 3} more)` : '');
  console.log(`| ${bug.id}: ${bug.what} | ${bug.file} | ${verdict} | ${shown} |`);
}
const survivors = results.filter((r) => r.verdict !== 'caught');
console.log(`\nplanted: ${results.length - survivors.length} passed, ${survivors.length} failed`);
process.exit(survivors.length ? 1 : 0);
