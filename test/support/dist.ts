import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

/**
 * The suites that run the built service (boot, cli, the process-based fault
 * suites) test dist/, not src/. `npm test` builds first; a plain `npx jest`
 * after an edit would silently test the old build, so those suites call
 * `assertDistIsCurrent()` (through `builtFile()` or startAppProcess) and fail
 * with one sentence saying to build. `nest build` empties dist/ first
 * (deleteOutDir), so the oldest built file is the time of the last build; the
 * library's tsc rewrites every file it emits, which comes to the same.
 */
export const REPO_ROOT = resolve(__dirname, '../..');
const DIST = join(REPO_ROOT, 'dist');
/** What `npm run build` writes, and from what: the workspaces (the library, the development PostgreSQL and the card network simulator the app loads in development), then the app. */
const BUILDS = [
  ...['idempotency', 'dev-postgres', 'card-network-simulator'].map((name) => ({
    dist: `packages/${name}/dist`,
    sources: [`packages/${name}/src`],
    built: (s: string) => s.replace(`packages/${name}/src`, `packages/${name}/dist`),
  })),
  { dist: 'dist', sources: ['src', 'migrations'], built: (s: string) => join('dist', s) },
];

function walk(dir: string, visit: (file: string, mtimeMs: number) => void): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, visit);
    else if (entry.isFile()) visit(path, statSync(path).mtimeMs);
  }
}

/** The reason a build cannot be trusted, or undefined when each is at least as new as every source file it compiles. */
export function distStaleness(root = REPO_ROOT): string | undefined {
  if (!existsSync(join(root, 'dist', 'src', 'main.js'))) return 'dist/ is missing';
  for (const build of BUILDS) {
    let oldestBuilt = Infinity;
    let newest = { file: '', mtime: -Infinity };
    for (const sources of build.sources) {
      const built = join(root, build.built(sources));
      if (!existsSync(built)) return `${build.built(sources)}/ is missing`;
      walk(built, (file, mtime) => {
        if (file.endsWith('.js')) oldestBuilt = Math.min(oldestBuilt, mtime);
      });
      walk(join(root, sources), (file, mtime) => {
        if (mtime > newest.mtime) newest = { file, mtime };
      });
    }
    if (newest.mtime > oldestBuilt) return `${build.dist}/ is older than ${relative(root, newest.file)}`;
  }
  return undefined;
}

/** Throws unless every build is newer than the last change to its sources. */
export function assertDistIsCurrent(): void {
  const stale = distStaleness();
  if (stale) throw new Error(`${stale}: build first (\`npm run build\`; \`npm test\` does it for you)`);
}

/** The absolute path of a built file (e.g. 'src/main.js' under dist/), after checking dist/ is current. */
export function builtFile(pathInDist: string): string {
  assertDistIsCurrent();
  return join(DIST, pathInDist);
}

/** The absolute path of a workspace's built file (e.g. 'main.js' under packages/<name>/dist/), after checking every build is current. */
export function builtPackageFile(name: string, pathInDist: string): string {
  assertDistIsCurrent();
  return join(REPO_ROOT, 'packages', name, 'dist', pathInDist);
}
