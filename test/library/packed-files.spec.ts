import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT, assertDistIsCurrent } from '../support/dist';

/**
 * What `npm publish` would upload for the two published packages, read from
 * `npm pack --dry-run --json` (no network, no tarball written; `npm publish --dry-run`
 * asks the registry, so it is not run here): only what a user needs, every `exports`
 * target, `main` and `types` inside, and a manifest npm publishes as it is.
 */
const PACKAGES = [
  { name: 'safe-retries', dir: 'packages/idempotency' },
  { name: '@safe-retries/client', dir: 'packages/client' },
];
/** What a user needs: the build, the SQL, the docs and the files npm shows on the package's page. */
const SHIPPED = /^(dist\/|sql\/|docs\/|(README|CHANGELOG)\.md$|LICENSE$|package\.json$)/;
/** Build and test leftovers that must never ship. */
const LEFTOVER = /tsbuildinfo$|\.(spec|test)\.[cm]?[jt]s$|(^|\/)(tests?|__tests__)\//;

interface Manifest {
  private?: boolean;
  license?: string;
  main?: string;
  types?: string;
  exports?: unknown;
  engines?: { node?: string };
  files?: string[];
  publishConfig?: { access?: string };
}

interface Packed {
  name: string;
  files: { path: string }[];
}

/** Every file an `exports` entry points at, whatever the condition. */
function targets(entry: unknown): string[] {
  if (typeof entry === 'string') return [entry];
  if (entry === null || typeof entry !== 'object') return [];
  return Object.values(entry).flatMap(targets);
}

describe('the packed packages (npm pack --dry-run)', () => {
  let packed: Map<string, string[]>;

  beforeAll(async () => {
    assertDistIsCurrent();
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
    const workspaces = PACKAGES.flatMap((p) => ['-w', p.name]);
    const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts', ...workspaces], { cwd: REPO_ROOT, env, maxBuffer: 16 * 1024 * 1024 });
    packed = new Map((JSON.parse(stdout) as Packed[]).map((p) => [p.name, p.files.map((f) => f.path)]));
  });

  describe.each(PACKAGES)('$name', ({ name, dir }) => {
    const manifest = JSON.parse(readFileSync(join(REPO_ROOT, dir, 'package.json'), 'utf8')) as Manifest;
    const files = () => packed.get(name) ?? [];

    it('holds only what a user needs, no build info or tests', () => {
      expect(files()).toEqual(expect.arrayContaining(['package.json', 'README.md', 'LICENSE']));
      expect(files().filter((f) => !SHIPPED.test(f) || LEFTOVER.test(f))).toEqual([]);
    });

    it('holds every exports target, main and types', () => {
      const wanted = [...targets(manifest.exports), manifest.main, manifest.types].filter((t): t is string => Boolean(t)).map((t) => t.replace(/^\.\//, ''));
      expect(wanted.length).toBeGreaterThan(2);
      expect(wanted.filter((t) => !files().includes(t))).toEqual([]);
    });

    it('is publishable as it stands: public, licensed, with the Node it needs', () => {
      expect(manifest.private).toBeUndefined();
      expect(manifest.license).toBe('MIT');
      expect(manifest.engines?.node).toEqual(expect.any(String));
      if (name.startsWith('@')) expect(manifest.publishConfig?.access).toBe('public');
    });
  });
});
