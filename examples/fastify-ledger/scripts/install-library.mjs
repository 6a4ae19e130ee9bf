#!/usr/bin/env node
// Installs the packed safe-retries package into this example, without recording it in
// package.json or package-lock.json (a tarball's integrity changes with every pack, and
// `npm ci` would then refuse the lockfile). Run `npm ci` first, then this.
//
//   node scripts/install-library.mjs [path/to/safe-retries-x.y.z.tgz]
//
// Without an argument it takes the one tarball in ../../.pack (`npm run pack:library` in
// the repository). Then it checks that `safe-retries` resolves into this example's own
// node_modules, a real folder, not a link back into the repository.
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const fail = (message) => {
  console.error(`install-library: ${message}`);
  process.exit(1);
};

let tgz = process.argv[2];
if (!tgz) {
  const packDir = resolve(HERE, '..', '..', '.pack');
  const found = existsSync(packDir) ? readdirSync(packDir).filter((f) => /^safe-retries-.*\.tgz$/.test(f)) : [];
  if (found.length !== 1) fail(`expected one safe-retries-*.tgz in ${packDir}, found ${found.length}: run \`npm run pack:library\` in the repository`);
  tgz = join(packDir, found[0]);
}
tgz = resolve(tgz);
if (!existsSync(tgz)) fail(`${tgz} does not exist`);

execFileSync('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--ignore-scripts', tgz], { cwd: HERE, stdio: 'inherit' });

const installed = join(HERE, 'node_modules', 'safe-retries');
if (!existsSync(installed) || lstatSync(installed).isSymbolicLink()) fail(`${installed} is missing or a link`);
const resolved = realpathSync(createRequire(join(HERE, 'package.json')).resolve('safe-retries'));
if (!resolved.startsWith(realpathSync(installed) + sep)) fail(`safe-retries resolves to ${resolved}, not into ${installed}`);
console.log(`install-library: safe-retries from ${tgz} -> ${resolved}`);
