import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * The library tests itself as an app uses it: by the package's names
 * ('safe-retries' and its exported subpaths), never by a path into a
 * package's sources. A test that needs an internal either reaches it through
 * what the package exports, or the package exports it (docs/options.md).
 */
const PACKAGE = resolve(__dirname, '../..');
const REPO = resolve(PACKAGE, '../..');

/** Every file of the library's tests. */
function testFiles(dir = join(PACKAGE, 'test')): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : testFiles(path);
    return /\.(ts|js|mjs|cjs)$/.test(entry.name) ? [path] : [];
  });
}

/** The module specifiers a file names: imports and re-exports, require(), import(), jest.mock() and jest.requireActual(). */
function specifiers(text: string): string[] {
  const patterns = [
    /^\s*(?:import|export)\s[^'";]*?from\s+['"]([^'"]+)['"]/gm,
    /^\s*import\s+['"]([^'"]+)['"]/gm,
    /\b(?:require|import|jest\.mock|jest\.doMock|jest\.requireActual|jest\.requireMock)\s*(?:<[^>]*>)?\(\s*['"]([^'"]+)['"]/g,
  ];
  return patterns.flatMap((pattern) => [...text.matchAll(pattern)].map((m) => m[1]));
}

/** Whether a specifier of `file` reaches into a package's (or the app's) sources. */
function intoSources(file: string, specifier: string): boolean {
  if (!specifier.startsWith('.')) return /(^|\/)src(\/|$)/.test(specifier) && !specifier.startsWith('node:');
  const target = relative(REPO, resolve(dirname(file), specifier));
  return /^(packages\/[^/]+\/)?src(\/|$)/.test(target);
}

/** What jest maps a package name to, from a jest config's moduleNameMapper. */
function mappedNames(config: string): [string, string][] {
  const { moduleNameMapper } = jest.requireActual<{ moduleNameMapper: Record<string, string> }>(config);
  return Object.entries(moduleNameMapper)
    .filter(([name]) => name.startsWith('^safe-retries'))
    .map(([name, target]) => [name.replace(/^\^|\$$/g, ''), relative(PACKAGE, target.replace('<rootDir>', dirname(config)))]);
}

describe("the library's tests", () => {
  it('import no file of a package by its path: only the names the packages export', () => {
    const offenders = testFiles()
      .filter((file) => file !== __filename)
      .flatMap((file) =>
      specifiers(readFileSync(file, 'utf8'))
        .filter((specifier) => intoSources(file, specifier))
        .map((specifier) => `${relative(PACKAGE, file)}: ${specifier}`),
    );
    expect(offenders).toEqual([]);
  });

  it('reach through jest exactly the entry points package.json exports, and no other file', () => {
    const { exports } = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')) as { exports: Record<string, string | { types: string }> };
    const exported = Object.entries(exports)
      .flatMap(([path, target]) => (typeof target === 'object' ? [[`safe-retries${path.slice(1)}`, target.types.replace(/^\.\/dist\//, 'src/').replace(/\.d\.ts$/, '.ts')]] : []))
      .sort();
    for (const config of [join(PACKAGE, 'jest.config.js'), join(REPO, 'jest.config.js')]) {
      expect(mappedNames(config).sort()).toEqual(exported);
    }
    for (const [, source] of exported) expect(existsSync(join(PACKAGE, source))).toBe(true);
  });

  it('finds what a file imports (the check above has teeth)', () => {
    const file = join(PACKAGE, 'test/unit/x.spec.ts');
    const text = [
      "import { a } from '../../src/core/a';",
      "export { b } from '../support/b';",
      "jest.mock('../../src/contract/key-id', () => ({}));",
      "const c = jest.requireActual<typeof import('../../src/c')>('../../src/c');",
      "import { d } from 'safe-retries/testing';",
      "import { e } from '../../../../src/config/config';",
    ].join('\n');
    expect(new Set(specifiers(text).filter((s) => intoSources(file, s)))).toEqual(
      new Set(['../../src/core/a', '../../../../src/config/config', '../../src/contract/key-id', '../../src/c']),
    );
  });
});
