import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

/**
 * The quick form of the planted bugs (`npm run test:planted` runs them, 15+
 * minutes): every plant of test/planted-bugs/bugs.mjs still matches exactly
 * one place of its file, and the test files named for it exist. A plant whose
 * text drifted from the code it breaks, or that matches twice, would otherwise
 * be found only by the long run. bugs.mjs is an ES module, which this jest
 * (CommonJS) cannot load: the runner's own `--check` reads it, in a node of
 * its own. docs/reliability.md's table names every bug, in order, and no other.
 */
const ROOT = resolve(__dirname, '..', '..');

describe('planted bugs (quick form)', () => {
  it('each plant applies to exactly one place of its file, and its tests exist', () => {
    const run = spawnSync(process.execPath, ['test/planted-bugs/run.mjs', '--check'], { cwd: ROOT, encoding: 'utf8' });
    expect(`${run.stdout}${run.stderr}`).toMatch(/each applies once, their test files exist/);
    expect(run.status).toBe(0);
  });

  it('docs/reliability.md lists every planted bug by its id, and no other', () => {
    const script = "import { BUGS } from './test/planted-bugs/bugs.mjs'; console.log(JSON.stringify(BUGS.map((b) => b.id)))";
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
    expect(run.status).toBe(0);
    const ids = JSON.parse(run.stdout) as string[];
    const page = readFileSync(resolve(ROOT, 'docs/reliability.md'), 'utf8');
    expect([...page.matchAll(/^\| `([a-z0-9-]+)` \|/gm)].map((m) => m[1])).toEqual(ids);
    expect(page).toContain(`The ${ids.length} bugs of`);
  });
});
