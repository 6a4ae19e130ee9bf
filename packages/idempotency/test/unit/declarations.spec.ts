import { readFileSync } from 'node:fs';
import { dirname, join, normalize, resolve } from 'node:path';
import ts from 'typescript';

/**
 * The package's declarations need only the types of its required peers: an app
 * type-checks them (skipLibCheck off) without @types/pg, ioredis or nats installed.
 * They are emitted here, in memory, with the package's build options, and
 * every declaration an entry point reaches is read for the packages it imports.
 */
const PACKAGE = resolve(__dirname, '../..');
/** Every entry point package.json exports, as a path under dist/ without its extension ('index', 'stores/redis/index', …). */
const ENTRIES = Object.values((JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')) as { exports: Record<string, string | { types: string }> }).exports)
  .flatMap((target) => (typeof target === 'object' ? [target.types.replace(/^\.\/dist\/|\.d\.ts$/g, '')] : []));

function emitDeclarations(): Map<string, string> {
  const config = ts.getParsedCommandLineOfConfigFile(join(PACKAGE, 'tsconfig.build.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined });
  if (!config) throw new Error('cannot read tsconfig.build.json');
  const program = ts.createProgram({ rootNames: config.fileNames, options: { ...config.options, noEmit: false, declaration: true, emitDeclarationOnly: true } });
  const out = new Map<string, string>();
  const { emitSkipped, diagnostics } = program.emit(undefined, (file, text) => out.set(normalize(file), text), undefined, true);
  if (emitSkipped) throw new Error(ts.formatDiagnostics(diagnostics, ts.createCompilerHost({})));
  return out;
}

function packagesReached(declarations: Map<string, string>, entry: string): Map<string, string> {
  const dist = join(PACKAGE, 'dist');
  const reached = new Map<string, string>();
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = declarations.get(file);
    if (text === undefined) throw new Error(`no declaration ${file}`);
    for (const [, a, b] of text.matchAll(/^(?:import|export)[^'"\n]*?from\s+["']([^"']+)["']|import\(["']([^"']+)["']\)/gm)) {
      const specifier = a ?? b;
      if (!specifier.startsWith('.')) {
        reached.set(specifier, file.slice(dist.length + 1));
        continue;
      }
      const base = resolve(dirname(file), specifier);
      const found = [`${base}.d.ts`, join(base, 'index.d.ts')].find((c) => declarations.has(c));
      if (!found) throw new Error(`${file}: cannot resolve ${specifier}`);
      visit(found);
    }
  };
  visit(join(dist, `${entry}.d.ts`));
  return reached;
}

describe('the package declarations', () => {
  const declarations = emitDeclarations();

  it.each(ENTRIES)('%s needs no types of pg, ioredis or nats', (entry) => {
    const reached = packagesReached(declarations, entry);
    // The walk reaches packages: the root's declarations name Nest's types.
    if (entry === 'index') expect(reached.has('@nestjs/common')).toBe(true);
    const leaks = [...reached].filter(([p]) => p === 'pg' || p === 'ioredis' || p === 'nats' || p.startsWith('@types/'));
    expect(leaks).toEqual([]);
  });
});
