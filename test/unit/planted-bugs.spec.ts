import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';

/**
 * The quick form of the planted bugs (`npm run test:planted` runs them, 15+
 * minutes): every plant of test/planted-bugs/bugs.mjs still matches exactly
 * one place of its file, and the test files named for it exist. A plant whose
 * text drifted from the code it breaks, or that matches twice, would otherwise
 * be found only by the long run. bugs.mjs is an ES module, which this jest
 * (CommonJS) cannot load: the runner's own `--check` reads it, in a node of
 * its own.
 */
const ROOT = resolve(__dirname, '..', '..');

describe('planted bugs (quick form)', () => {
  it('each plant applies to exactly one place of its file, and its tests exist', () => {
    const run = spawnSync(process.execPath, ['test/planted-bugs/run.mjs', '--check'], { cwd: ROOT, encoding: 'utf8' });
    expect(`${run.stdout}${run.stderr}`).toMatch(/each applies once, their test files exist/);
    expect(run.status).toBe(0);
  });
});
