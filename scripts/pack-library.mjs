#!/usr/bin/env node
// Packs the idempotency module (src/idempotency, built by `nest build` into
// dist/src/idempotency) as the library package `safe-retries`:
//
//   .pack/safe-retries/            the staged package (gitignored)
//     dist/**.js, dist/**.d.ts     the compiled module, its public entry dist/index.js
//     sql/idempotency-keys.sql     the schema, for apps without TypeORM migrations
//     README.md                    docs/library.md
//     LICENSE, package.json
//   .pack/safe-retries-<version>.tgz   what `npm install` takes
//
// Its dependencies are derived from what the compiled module actually loads:
// every bare specifier in a require() or import() of its .js files and in an import of its
// .d.ts files must be listed in PACKAGES below (as a peer or as a dependency),
// with its version range taken from the root package.json; anything else that
// is not a node: builtin stops the script. So the list cannot drift from the code.
//
// Usage: npm run pack:library   (= nest build && node scripts/pack-library.mjs [--out DIR])
// Prints the absolute path of the .tgz as its last line.
import { execFileSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BUILT = join(ROOT, 'dist', 'src', 'idempotency');
// `--out DIR` packs into another folder (the root's example-app suite packs into a temp one).
const outArg = process.argv.indexOf('--out');
const OUT = outArg > 0 && process.argv[outArg + 1] ? resolve(process.argv[outArg + 1]) : join(ROOT, '.pack');
const STAGE = join(OUT, 'safe-retries');

/**
 * What the module may load, and how a user gets it.
 * - peer: the app shares the one copy (Nest's singletons and decorators, the DataSource,
 *   the CLS and its transactional plugin, the prom-client Registry an app may pass in,
 *   @opentelemetry/api, whose global tracer provider the app's SDK registers).
 *   None is optional: each is imported at the top of a file that index.js loads.
 * - optional-peer: loaded only by a feature the app opts into; the app installs it then.
 *   ioredis: only the Redis store loads it (import() when the module has a `redis` option),
 *   and an app that passes its own client must share the one copy it built that client with.
 * - dependency: an implementation detail the app does not otherwise declare.
 * The CLS packages are peers even though transactionalClsModule() builds the registration: an
 * app's own services use the same TransactionHost, which only one copy of each can give.
 */
const PACKAGES = {
  '@nestjs/common': 'peer',
  '@nestjs/core': 'peer',
  '@nestjs/typeorm': 'peer',
  '@nestjs/schedule': 'peer',
  '@nestjs/swagger': 'peer',
  '@nestjs-cls/transactional': 'peer',
  '@nestjs-cls/transactional-adapter-typeorm': 'peer',
  'nestjs-cls': 'peer',
  typeorm: 'peer',
  pg: 'peer',
  'prom-client': 'peer',
  rxjs: 'peer',
  '@opentelemetry/api': 'peer',
  ioredis: 'optional-peer',
  cron: 'dependency',
  'lru-cache': 'dependency',
};

function fail(message) {
  console.error(`pack-library: ${message}`);
  process.exit(1);
}

function walk(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]));
}

const packageName = (specifier) => specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');
const isBuiltin = (specifier) => specifier.startsWith('node:') || builtinModules.includes(specifier.split('/')[0]);

const root = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
if (!existsSync(join(BUILT, 'index.js')) || !existsSync(join(BUILT, 'index.d.ts'))) {
  fail(`${relative(ROOT, BUILT)}/index.js and index.d.ts are missing: run \`npx nest build\` first (npm run pack:library does)`);
}

// 1. What the compiled module loads (runtime) and names (types).
const files = walk(BUILT).filter((f) => f.endsWith('.js') || f.endsWith('.d.ts'));
const runtime = new Set();
const typesOnly = new Set();
for (const file of files) {
  const text = readFileSync(file, 'utf8');
  const specifiers = file.endsWith('.d.ts')
    ? [...text.matchAll(/(?:from\s+|import\s*\(\s*)['"]([^'"]+)['"]/g)].map((m) => m[1])
    : // require() and a dynamic import() (tsc keeps `await import('x')` as is: ioredis is loaded so)
      [...text.matchAll(/\b(?:require|import)\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1]);
  for (const specifier of specifiers) {
    if (specifier.startsWith('.')) {
      // A relative import must stay inside the module: the package ships nothing else.
      const target = resolve(dirname(file), specifier);
      if (relative(BUILT, target).startsWith('..')) fail(`${relative(ROOT, file)} loads ${specifier}, outside src/idempotency`);
      continue;
    }
    if (isBuiltin(specifier)) continue;
    (file.endsWith('.d.ts') ? typesOnly : runtime).add(packageName(specifier));
  }
}
const needed = [...new Set([...runtime, ...typesOnly])].sort();
const undeclared = needed.filter((name) => !(name in PACKAGES));
if (undeclared.length > 0) {
  fail(`the module loads ${undeclared.join(', ')}, which is neither a peer nor a dependency in scripts/pack-library.mjs: declare it there`);
}
const unused = Object.keys(PACKAGES).filter((name) => !needed.includes(name));
if (unused.length > 0) fail(`scripts/pack-library.mjs declares ${unused.join(', ')}, which the module no longer loads: remove it there`);

const rootRange = (name) => root.dependencies?.[name] ?? fail(`${name} has no version range in the root package.json dependencies`);
const pick = (kind) => Object.fromEntries(needed.filter((n) => PACKAGES[n] === kind).map((n) => [n, rootRange(n)]));

// 2. Stage the package.
rmSync(STAGE, { recursive: true, force: true });
mkdirSync(STAGE, { recursive: true });
cpSync(BUILT, join(STAGE, 'dist'), { recursive: true, filter: (src) => !src.endsWith('.map') });
mkdirSync(join(STAGE, 'sql'));
copyFileSync(join(ROOT, 'src', 'idempotency', 'sql', 'idempotency-keys.sql'), join(STAGE, 'sql', 'idempotency-keys.sql'));
copyFileSync(join(ROOT, 'docs', 'library.md'), join(STAGE, 'README.md'));
copyFileSync(join(ROOT, 'LICENSE'), join(STAGE, 'LICENSE'));

const manifest = {
  name: 'safe-retries',
  version: root.version,
  description: 'Exactly-once POST routes for NestJS: an Idempotency-Key interceptor whose stored response commits in the same PostgreSQL transaction as the handler\'s writes',
  license: root.license,
  keywords: ['nestjs', 'idempotency', 'idempotency-key', 'postgresql', 'typeorm', 'exactly-once'],
  type: 'commonjs',
  main: './dist/index.js',
  types: './dist/index.d.ts',
  exports: {
    '.': { types: './dist/index.d.ts', default: './dist/index.js' },
    './sql/idempotency-keys.sql': './sql/idempotency-keys.sql',
    './package.json': './package.json',
  },
  files: ['dist', 'sql', 'README.md', 'LICENSE'],
  engines: root.engines,
  dependencies: pick('dependency'),
  peerDependencies: { ...pick('peer'), ...pick('optional-peer') },
  peerDependenciesMeta: Object.fromEntries(Object.keys(pick('optional-peer')).map((n) => [n, { optional: true }])),
};
writeFileSync(join(STAGE, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);

// 3. Pack it. --ignore-scripts: the staged package has none, and none of the root's may run.
for (const old of readdirSync(OUT).filter((f) => f.endsWith('.tgz'))) rmSync(join(OUT, old));
const packed = JSON.parse(
  execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', OUT], { cwd: STAGE, encoding: 'utf8' }),
)[0];
const tgz = join(OUT, packed.filename);
if (!existsSync(tgz)) fail(`npm pack reported ${packed.filename} but ${tgz} does not exist`);
console.error(`pack-library: ${packed.name}@${packed.version}, ${packed.entryCount} files, ${packed.size} bytes`);
console.error(`  peerDependencies: ${Object.entries(manifest.peerDependencies).map(([n, v]) => `${n}@${v}`).join(' ')}`);
console.error(`  dependencies: ${Object.entries(manifest.dependencies).map(([n, v]) => `${n}@${v}`).join(' ')}`);
console.log(tgz);
