import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * nest-cli.json is read by Nest's CLI (`npx @nestjs/cli generate … --project api`), which
 * is not a dependency: nothing else would notice a path in it that no longer exists.
 */
const root = join(__dirname, '..', '..');
const config = JSON.parse(readFileSync(join(root, 'nest-cli.json'), 'utf8')) as {
  sourceRoot: string;
  entryFile: string;
  compilerOptions: { tsConfigPath: string };
  projects: Record<string, { root: string; sourceRoot: string; entryFile: string; compilerOptions: { tsConfigPath: string } }>;
};

describe('nest-cli.json', () => {
  const places = [
    ['sourceRoot', config.sourceRoot],
    ['entryFile', `${config.entryFile}.ts`],
    ['tsConfigPath', config.compilerOptions.tsConfigPath],
    ...Object.entries(config.projects).flatMap(([name, p]) => [
      [`${name}.root`, p.root],
      [`${name}.sourceRoot`, p.sourceRoot],
      [`${name}.entryFile`, p.root === '.' ? `${p.entryFile}.ts` : join(p.sourceRoot, `${p.entryFile}.ts`)],
      [`${name}.tsConfigPath`, p.compilerOptions.tsConfigPath],
    ]),
  ];

  it.each(places)('%s names a path that exists (%s)', (_what, path) => {
    expect(existsSync(join(root, path))).toBe(true);
  });

  it('has a project for the service and each workspace package', () => {
    const workspaces = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { workspaces: string[] };
    expect(workspaces.workspaces).toEqual(['packages/*']);
    const packages = readdirSync(join(root, 'packages')).filter((name) => existsSync(join(root, 'packages', name, 'package.json')));
    const roots = Object.values(config.projects).map((p) => p.root).sort();
    expect(roots).toEqual(['.', ...packages.map((name) => `packages/${name}`)].sort());
  });
});
