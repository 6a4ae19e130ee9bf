import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

/**
 * The suites that run the built service (boot, cli, the process-based fault
 * suites) test dist/, not src/. `npm test` builds first; a plain `npx jest`
 * after an edit would silently test the old build, so those suites call
 * `assertDistIsCurrent()` (through `builtFile()` or startAppProcess) and fail
 * with one sentence saying to build. `nest build` empties dist/ first
 * (deleteOutDir), so the oldest built file is the time of the last build.
 */
export const REPO_ROOT = resolve(__dirname, '../..');
const SOURCES = ['src', 'migrations'];
const DIST = join(REPO_ROOT, 'dist');

function walk(dir: string, visit: (file: string, mtimeMs: number) => void): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, visit);
    else if (entry.isFile()) visit(path, statSync(path).mtimeMs);
  }
}

/** The reason dist/ cannot be trusted, or undefined when it is at least as new as every source file. */
export function distStaleness(root = REPO_ROOT): string | undefined {
  const dist = join(root, 'dist');
  if (!existsSync(join(dist, 'src', 'main.js'))) return 'dist/ is missing';
  let oldestBuilt = Infinity;
  for (const dir of SOURCES.map((d) => join(dist, d)).filter(existsSync)) {
    walk(dir, (file, mtime) => {
      if (file.endsWith('.js')) oldestBuilt = Math.min(oldestBuilt, mtime);
    });
  }
  let newest = { file: '', mtime: -Infinity };
  for (const dir of SOURCES.map((d) => join(root, d)).filter(existsSync)) {
    walk(dir, (file, mtime) => {
      if (mtime > newest.mtime) newest = { file, mtime };
    });
  }
  if (newest.mtime > oldestBuilt) return `dist/ is older than ${relative(root, newest.file)}`;
  return undefined;
}

/** Throws unless dist/ was built after the last change under src/ and migrations/. */
export function assertDistIsCurrent(): void {
  const stale = distStaleness();
  if (stale) throw new Error(`${stale}: build first (\`npx nest build\`; \`npm test\` does it for you)`);
}

/** The absolute path of a built file (e.g. 'src/main.js' under dist/), after checking dist/ is current. */
export function builtFile(pathInDist: string): string {
  assertDistIsCurrent();
  return join(DIST, pathInDist);
}
