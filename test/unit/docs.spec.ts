import { execFileSync } from 'node:child_process';
import { builtinModules } from 'node:module';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, posix, relative, resolve, sep } from 'node:path';

/**
 * The README and the docs say only what runs: every import in them resolves the way Node
 * resolves it (a subpath a package does not export is ERR_PACKAGE_PATH_NOT_EXPORTED, so
 * it fails here), every relative link points at a file of this repository (and at a
 * heading that exists, for a link with an anchor), every `npm run X` names a script of
 * the package it runs in, and the README shows the two commands on its first screen.
 */
const ROOT = resolve(__dirname, '..', '..');

interface PackageJson {
  name?: string;
  main?: string;
  types?: string;
  exports?: unknown;
  scripts?: Record<string, string>;
}

const readJson = (file: string): PackageJson => JSON.parse(readFileSync(file, 'utf8')) as PackageJson;
const rootPackage = readJson(join(ROOT, 'package.json'));
const workspaces = new Map<string, string>(
  readdirSync(join(ROOT, 'packages'))
    .map((dir) => join(ROOT, 'packages', dir))
    .filter((dir) => existsSync(join(dir, 'package.json')))
    .map((dir) => [readJson(join(dir, 'package.json')).name ?? dir, dir]),
);

/** The markdown pages of a docs folder (relative to the root); none when it has no such folder. */
const docsPages = (dir: string): string[] =>
  existsSync(join(ROOT, dir))
    ? readdirSync(join(ROOT, dir))
        .filter((f) => f.endsWith('.md'))
        .map((f) => join(dir, f))
    : [];

/** The pages checked: the README, docs/ and every workspace package's README and docs/. */
function pages(): string[] {
  const packagePages = [...workspaces.values()].flatMap((dir) => {
    const home = relative(ROOT, dir);
    return [join(home, 'README.md')].filter((f) => existsSync(join(ROOT, f))).concat(docsPages(join(home, 'docs')));
  });
  return ['README.md', ...docsPages('docs'), ...packagePages];
}

/** The package.json that governs a page: its package's (a package's README or docs page), else the root's. */
const packageOf = (page: string): PackageJson => {
  const [top, name] = page.split(sep);
  return top === 'packages' ? readJson(join(ROOT, top, name, 'package.json')) : rootPackage;
};

const text = (page: string): string => readFileSync(join(ROOT, page), 'utf8');

/** `import … from 'x'` and `export … from 'x'`, in code blocks and inline code alike. */
function importsOf(markdown: string): { specifier: string; typeOnly: boolean }[] {
  const found: { specifier: string; typeOnly: boolean }[] = [];
  const pattern = /\b(import|export)\s+(type\s+)?[\w*{}\s,$]*?\bfrom\s+['"]([^'"]+)['"]/g;
  for (const match of markdown.matchAll(pattern)) found.push({ specifier: match[3], typeOnly: Boolean(match[2]) });
  return found;
}

/** The target of an `exports` entry for the conditions Node (or TypeScript, for a type-only import) would use. */
function exportTarget(entry: unknown, typeOnly: boolean): string | undefined {
  if (typeof entry === 'string') return entry;
  if (Array.isArray(entry)) return entry.map((e) => exportTarget(e, typeOnly)).find(Boolean);
  if (entry === null || typeof entry !== 'object') return undefined;
  const conditions = typeOnly ? ['types', 'require', 'node', 'default', 'import'] : ['require', 'node', 'default', 'import'];
  for (const condition of conditions) {
    const target = exportTarget((entry as Record<string, unknown>)[condition], typeOnly);
    if (target) return target;
  }
  return undefined;
}

/** The subpath's entry in `exports`, exact or through a `*` pattern. */
function exportEntry(exports: unknown, subpath: string): { entry: unknown; star?: string } | undefined {
  const map = typeof exports === 'object' && exports !== null && !Array.isArray(exports) && Object.keys(exports).some((k) => k.startsWith('.')) ? (exports as Record<string, unknown>) : { '.': exports };
  if (subpath in map) return { entry: map[subpath] };
  for (const [key, entry] of Object.entries(map)) {
    const star = key.indexOf('*');
    if (star < 0) continue;
    const [before, after] = [key.slice(0, star), key.slice(star + 1)];
    if (subpath.startsWith(before) && subpath.endsWith(after) && subpath.length >= key.length - 1) return { entry, star: subpath.slice(before.length, subpath.length - after.length) };
  }
  return undefined;
}

/**
 * A workspace package's `dist/` is built from its `src/` (rootDir src, outDir dist); before
 * `npm run build` its source stands for the built file.
 */
function fileExists(packageDir: string, target: string, isWorkspace: boolean): boolean {
  const file = join(packageDir, target);
  if (existsSync(file)) return true;
  if (!isWorkspace || !target.startsWith('./dist/')) return false;
  const source = join(packageDir, 'src', target.slice('./dist/'.length)).replace(/\.d\.ts$|\.js$/, '.ts');
  return existsSync(source);
}

/** Why `specifier` would not resolve from the repository's root, or undefined when it does. */
function unresolved(specifier: string, typeOnly: boolean): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/')) return undefined; // the reader's own files
  if (specifier.startsWith('node:') || builtinModules.includes(specifier)) return undefined;
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  const subpath = specifier === name ? '.' : `./${specifier.slice(name.length + 1)}`;
  const workspace = workspaces.get(name);
  let packageDir = workspace ?? join(ROOT, 'node_modules', name);
  if (!existsSync(join(packageDir, 'package.json')) && typeOnly) {
    packageDir = join(ROOT, 'node_modules', '@types', name.replace(/^@/, '').replace('/', '__'));
  }
  if (!existsSync(join(packageDir, 'package.json'))) return `no package ${name} is installed (${name === rootPackage.name ? 'the service itself is no dependency' : 'npm ci installs no such name'})`;
  const pkg = readJson(join(packageDir, 'package.json'));
  if (pkg.exports !== undefined) {
    const found = exportEntry(pkg.exports, subpath);
    if (!found) return `${name} does not export ${subpath} (ERR_PACKAGE_PATH_NOT_EXPORTED)`;
    const target = exportTarget(found.entry, typeOnly)?.replace('*', found.star ?? '*');
    if (!target) return `${name}'s export ${subpath} has no target for require or types`;
    return fileExists(packageDir, target, Boolean(workspace)) ? undefined : `${name}'s export ${subpath} points at ${target}, which does not exist`;
  }
  if (subpath === '.') return undefined;
  const base = join(packageDir, subpath);
  return ['', '.js', '.d.ts', '/index.js', '/index.d.ts'].some((ext) => existsSync(base + ext)) ? undefined : `${name} has no ${subpath}`;
}

/** The anchor GitHub gives a heading. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/ /g, '-');
}

/** Anchors of a markdown page: its headings' slugs, numbered as GitHub numbers repeats. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const withoutCode = markdown.replace(/^```[\s\S]*?^```/gm, '');
  for (const match of withoutCode.matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const base = slug(match[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Why a relative link of `page` is broken, or undefined when it is not. */
function brokenLink(page: string, href: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(href)) return undefined; // https:, mailto:
  const [path, anchor] = href.split('#', 2);
  const target = path === '' ? join(ROOT, page) : resolve(ROOT, dirname(page), decodeURIComponent(path));
  const inRepo = relative(ROOT, target);
  if (inRepo.startsWith('..') || inRepo.startsWith(sep)) return `${href} leaves the repository`;
  if (!existsSync(target)) return `${href}: no such file`;
  if (anchor && statSync(target).isFile() && target.endsWith('.md') && !anchorsOf(readFileSync(target, 'utf8')).has(anchor)) {
    return `${href}: no heading #${anchor} in ${inRepo}`;
  }
  return undefined;
}

/** Markdown links outside code: `[text](href)`. */
function linksOf(markdown: string): string[] {
  const withoutCode = markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
  return [...withoutCode.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]);
}

/** Paths that climb out of the page's folder (`../x`), in prose or inline code. */
function climbingPathsOf(markdown: string): string[] {
  const withoutBlocks = markdown.replace(/^```[\s\S]*?^```/gm, '');
  return [...withoutBlocks.matchAll(/(?:^|[\s`(])((?:\.\.\/)+[\w.@-][\w./@-]*)/g)].map((m) => m[1]);
}

/** `table.column` of every column that holds an Idempotency-Key, as the migrations create them. */
function keyColumnsOfMigrations(): string[] {
  const dir = join(ROOT, 'migrations');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.ts'))
    .flatMap((f) => [...readFileSync(join(dir, f), 'utf8').matchAll(/ALTER TABLE (\w+) ADD COLUMN (idempotency_key)\b/g)].map((m) => `${m[1]}.${m[2]}`));
}

/** `npm run X` (and `npm start`/`npm test`), with the workspace it names, if any. */
function npmScriptsOf(markdown: string): { script: string; workspace?: string }[] {
  const found: { script: string; workspace?: string }[] = [];
  for (const match of markdown.matchAll(/\bnpm (?:run ([a-z][\w:.-]*[\w])|(start|test)\b)([^\n`;&|#]*)/g)) {
    const workspace = /(?:-w|--workspace)[ =](\S+)/.exec(match[3])?.[1];
    found.push({ script: match[1] ?? match[2], workspace });
  }
  return found;
}

/** The files `npm pack` puts in the library's tarball (package-relative paths), scripts skipped. */
function packedFiles(): string[] {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts', '-w', 'safe-retries'], { cwd: ROOT, env, encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
  return (JSON.parse(out) as { files: { path: string }[] }[])[0].files.map((f) => f.path);
}

/** Why a relative link of a packed page does not resolve inside the tarball, or undefined. */
function brokenPackedLink(files: Set<string>, page: string, href: string, read: (file: string) => string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(href)) return undefined; // an absolute URL
  const [path, anchor] = href.split('#', 2);
  const target = path === '' ? page : posix.normalize(posix.join(posix.dirname(page), decodeURIComponent(path))).replace(/\/$/, '');
  if (target.startsWith('..')) return `${href} leaves the package`;
  if (!files.has(target) && ![...files].some((f) => f.startsWith(`${target}/`))) return `${href}: not in the tarball`;
  if (anchor && target.endsWith('.md') && !anchorsOf(read(target)).has(anchor)) return `${href}: no heading #${anchor} in ${target}`;
  return undefined;
}

/** The names a TypeScript entry file exports (values and types), as written. */
function exportedNames(source: string): string[] {
  const names: string[] = [];
  for (const m of source.matchAll(/^export\s+(?:type\s+)?\{([^}]*)\}/gm)) {
    names.push(...m[1].split(',').map((n) => n.trim().replace(/^type\s+/, '').split(/\s+as\s+/).pop() ?? '').filter(Boolean));
  }
  for (const m of source.matchAll(/^export\s+(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?:function\*?|class|const|let|enum|interface|type)\s+([A-Za-z_$][\w$]*)/gm)) names.push(m[1]);
  return names;
}

/** The library's entry points: each `exports` subpath with the source file of its types. */
function libraryEntries(): { subpath: string; source: string }[] {
  const dir = join(ROOT, 'packages', 'idempotency');
  const exportsMap = readJson(join(dir, 'package.json')).exports as Record<string, unknown>;
  return Object.entries(exportsMap).flatMap(([subpath, entry]) => {
    const types = exportTarget(entry, true);
    if (!types?.startsWith('./dist/')) return [];
    return [{ subpath, source: join(dir, 'src', types.slice('./dist/'.length).replace(/\.d\.ts$/, '.ts')) }];
  });
}

describe('README and docs', () => {
  const checked = pages();

  it('checks the README, docs/ and the packages READMEs', () => {
    expect(checked).toEqual(expect.arrayContaining(['README.md', join('docs', 'README.md'), join('packages', 'client', 'README.md')]));
  });

  it('show both commands on the README first screen', () => {
    const firstScreen = text('README.md').split('\n').slice(0, 30).join('\n');
    expect(firstScreen).toContain('npm ci && npm start');
    expect(firstScreen).toContain('npm ci && npm test');
  });

  it('import only what resolves, as written', () => {
    const problems = checked.flatMap((page) =>
      importsOf(text(page)).flatMap(({ specifier, typeOnly }) => {
        const why = unresolved(specifier, typeOnly);
        return why ? [`${page}: '${specifier}': ${why}`] : [];
      }),
    );
    expect(problems).toEqual([]);
  });

  it('link only to files (and headings) inside the repository', () => {
    const problems = checked.flatMap((page) => linksOf(text(page)).flatMap((href) => [brokenLink(page, href)].filter(Boolean).map((why) => `${page}: ${why}`)));
    expect(problems).toEqual([]);
  });

  it('name no path outside the repository', () => {
    const problems = checked.flatMap((page) =>
      climbingPathsOf(text(page)).flatMap((path) => {
        const inRepo = relative(ROOT, resolve(ROOT, dirname(page), path));
        if (inRepo.startsWith('..')) return [`${page}: ${path} leaves the repository`];
        return existsSync(join(ROOT, inRepo)) ? [] : [`${page}: ${path}: no such file in the repository`];
      }),
    );
    expect(problems).toEqual([]);
  });

  it('say where the service keeps an Idempotency-Key in clear', () => {
    const columns = keyColumnsOfMigrations();
    expect(columns).toEqual(expect.arrayContaining(['payments.idempotency_key', 'refunds.idempotency_key']));
    const policy = text(join('docs', 'idempotency.md'));
    expect(columns.filter((column) => !policy.includes(`\`${column}\``))).toEqual([]);
  });

  it('name only npm scripts that exist', () => {
    const problems = checked.flatMap((page) => {
      const home = packageOf(page);
      return npmScriptsOf(text(page)).flatMap(({ script, workspace }) => {
        if (workspace) {
          const dir = workspaces.get(workspace);
          return dir && readJson(join(dir, 'package.json')).scripts?.[script] ? [] : [`${page}: npm ${script} -w ${workspace}: no such script`];
        }
        // A package's README names its own scripts and the repository root's (run from there).
        return home.scripts?.[script] || rootPackage.scripts?.[script] ? [] : [`${page}: npm run ${script}: no such script`];
      });
    });
    expect(problems).toEqual([]);
  });

  describe("the library's tarball", () => {
    const pkg = join(ROOT, 'packages', 'idempotency');
    const read = (file: string): string => readFileSync(join(pkg, file), 'utf8');

    it('links only to what it holds (or to absolute URLs)', () => {
      const files = new Set(packedFiles());
      const pagesPacked = [...files].filter((f) => f.endsWith('.md'));
      expect(pagesPacked).toEqual(expect.arrayContaining(['README.md', 'docs/options.md']));
      const problems = pagesPacked.flatMap((page) => linksOf(read(page)).flatMap((href) => [brokenPackedLink(files, page, href, read)].filter(Boolean).map((why) => `${page}: ${why}`)));
      expect(problems).toEqual([]);
    });

    it('names every export of every entry point in docs/options.md', () => {
      const options = read('docs/options.md');
      const entries = libraryEntries();
      expect(entries.map((e) => e.subpath)).toEqual(expect.arrayContaining(['.', './testing', './swagger']));
      const missing = entries.flatMap(({ subpath, source }) =>
        exportedNames(readFileSync(source, 'utf8'))
          .filter((name) => !new RegExp(`\\b${name.replace(/\$/g, '\\$')}\\b`).test(options))
          .map((name) => `${subpath}: ${name}`),
      );
      expect(missing).toEqual([]);
    });

    it('catch a link out of the package and an unnamed export', () => {
      const files = new Set(['README.md', 'docs/a.md']);
      expect(brokenPackedLink(files, 'README.md', '../../docs/idempotency.md', () => '')).toMatch(/leaves the package/);
      expect(brokenPackedLink(files, 'docs/a.md', '../docs/b.md', () => '')).toMatch(/not in the tarball/);
      expect(brokenPackedLink(files, 'docs/a.md', '../README.md', () => '')).toBeUndefined();
      expect(brokenPackedLink(files, 'README.md', 'https://example.com/x', () => '')).toBeUndefined();
      expect(exportedNames("export { A, B as C } from './x';\nexport type { D } from './y';\nexport function e() {}\nexport type F = string;")).toEqual(['A', 'C', 'D', 'e', 'F']);
    });
  });

  describe('the checks fail on what they exist to catch', () => {
    it('an import of a subpath the package does not export', () => {
      expect(unresolved('safe-retries/client', false)).toMatch(/ERR_PACKAGE_PATH_NOT_EXPORTED/);
      expect(unresolved('safe-retries-api/client', false)).toMatch(/no package safe-retries-api/);
      expect(unresolved('@safe-retries/client', false)).toBeUndefined();
      expect(unresolved('safe-retries/testing', false)).toBeUndefined();
    });

    it('a link outside the repository, to a missing file or to a missing heading', () => {
      expect(brokenLink('docs/benchmarks.md', '../../shared/peers')).toMatch(/leaves the repository/);
      expect(brokenLink('README.md', 'docs/nothing-here.md')).toMatch(/no such file/);
      expect(brokenLink('README.md', 'docs/idempotency.md#no-such-heading')).toMatch(/no heading/);
      expect(brokenLink('README.md', 'docs/idempotency.md#the-key')).toBeUndefined();
    });

    it('a path in prose that climbs out of the repository', () => {
      expect(climbingPathsOf('`../shared/peers` holds the servers; see [x](../packages/a/README.md)')).toEqual(['../shared/peers', '../packages/a/README.md']);
    });

    it('finds imports across lines, type-only imports and workspace flags', () => {
      expect(importsOf("import {\n  A,\n  B,\n} from 'x';\nimport type { C } from 'y';")).toEqual([
        { specifier: 'x', typeOnly: false },
        { specifier: 'y', typeOnly: true },
      ]);
      expect(npmScriptsOf('`npm run build -w @safe-retries/client` then `npm start`')).toEqual([
        { script: 'build', workspace: '@safe-retries/client' },
        { script: 'start', workspace: undefined },
      ]);
    });
  });
});
