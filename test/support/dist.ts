import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * The suites that run the built service (boot, cli, the process-based fault
 * suites) test dist/, not src/. `npm test` builds first; a plain `npx jest`
 * after an edit would silently test the old build, so those suites call
 * `assertDistIsCurrent()` (through `builtFile()` or startAppProcess) and fail
 * with one sentence saying to build. `tsc -b` writes (or touches) a project's
 * build info last, and only once every source is compiled, so a build is
 * current when its build info is newer than every source it compiles and, for
 * the app, than the build info of each workspace it builds against.
 */
export const REPO_ROOT = resolve(__dirname, '../..');
const DIST = join(REPO_ROOT, 'dist');
/** What `npm run build` writes, and from what: the workspaces (the library, the development PostgreSQL and the card network simulator the app loads in development, the client SDK the examples install), then the app. */
const WORKSPACES = ['idempotency', 'dev-postgres', 'card-network-simulator', 'client'].map((name) => ({
  info: `packages/${name}/dist/tsconfig.build.tsbuildinfo`,
  sources: [`packages/${name}/src`],
}));
const APP = { info: 'dist/tsconfig.build.tsbuildinfo', sources: ['src', 'migrations'] };

function walk(dir: string, visit: (file: string, mtimeMs: number) => void): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, visit);
    else if (entry.isFile()) visit(path, statSync(path).mtimeMs);
  }
}

/** The reason a build cannot be trusted, or undefined when each is newer than every source file it compiles. */
export function distStaleness(root = REPO_ROOT): string | undefined {
  if (!existsSync(join(root, 'dist', 'src', 'main.js'))) return 'dist/ is missing';
  let newestWorkspace = { dist: '', built: -Infinity };
  for (const build of [...WORKSPACES, APP]) {
    const dist = dirname(build.info);
    if (!existsSync(join(root, build.info))) return `${dist}/ is missing`;
    const built = statSync(join(root, build.info)).mtimeMs;
    let newest = { file: '', mtime: -Infinity };
    for (const sources of build.sources) {
      walk(join(root, sources), (file, mtime) => {
        if (mtime > newest.mtime) newest = { file, mtime };
      });
    }
    if (newest.mtime > built) return `${dist}/ is older than ${relative(root, newest.file)}`;
    if (build === APP && newestWorkspace.built > built) return `dist/ is older than ${newestWorkspace.dist}/`;
    if (built > newestWorkspace.built) newestWorkspace = { dist, built };
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
