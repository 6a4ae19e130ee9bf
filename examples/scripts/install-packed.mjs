#!/usr/bin/env node
// Installs packed packages of this repository into the example whose folder is the
// current directory (`npm run install:library` runs it there), without recording them in
// package.json or package-lock.json (a tarball's integrity changes with every pack, and
// `npm ci` would then refuse the lockfile). Run `npm ci` first, then this.
//
//   node ../scripts/install-packed.mjs <package>... [--from <folder of tarballs>]
//
// Each package (`safe-retries`, `@safe-retries/client`) comes from the one tarball npm pack
// named for it in the folder, by default ../../.pack (`npm run pack:library` in the
// repository). All are installed by one `npm install`: another `--no-save` install would
// remove them. Then it checks that each resolves into this example's own node_modules, a
// real folder, not a link back into the repository.
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = process.cwd();
const fail = (message) => {
  console.error(`install-packed: ${message}`);
  process.exit(1);
};

const args = process.argv.slice(2);
const at = args.indexOf('--from');
const packDir = at === -1 ? resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '.pack') : resolve(args[at + 1] ?? fail('--from needs a folder'));
const names = at === -1 ? args : [...args.slice(0, at), ...args.slice(at + 2)];
if (names.length === 0) fail('name the packages to install, e.g. safe-retries');
if (!existsSync(join(HERE, 'package.json'))) fail(`${HERE} is not an example's folder (no package.json)`);

const files = existsSync(packDir) ? readdirSync(packDir) : [];
const tarballs = names.map((name) => {
  // npm pack writes @scope/name as scope-name-<version>.tgz
  const base = name.replace(/^@/, '').replace('/', '-');
  const found = files.filter((f) => f.startsWith(`${base}-`) && /^\d+\.\d+\.\d+.*\.tgz$/.test(f.slice(base.length + 1)));
  if (found.length !== 1) fail(`expected one ${base}-<version>.tgz in ${packDir}, found ${found.length}: run \`npm run pack:library\` in the repository`);
  return join(packDir, found[0]);
});

execFileSync('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--ignore-scripts', ...tarballs], { cwd: HERE, stdio: 'inherit' });

const require = createRequire(join(HERE, 'package.json'));
for (const [i, name] of names.entries()) {
  const installed = join(HERE, 'node_modules', ...name.split('/'));
  if (!existsSync(installed) || lstatSync(installed).isSymbolicLink()) fail(`${installed} is missing or a link`);
  const resolved = realpathSync(require.resolve(name));
  if (!resolved.startsWith(realpathSync(installed) + sep)) fail(`${name} resolves to ${resolved}, not into ${installed}`);
  console.log(`install-packed: ${name} from ${tarballs[i]} -> ${resolved}`);
}
