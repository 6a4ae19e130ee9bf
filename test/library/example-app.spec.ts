import { readdirSync, realpathSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { installExample, resolvedFrom, run, runExampleTests } from '../support/example-app';

/**
 * Proof the library installs: pack the library's workspace (packages/idempotency, `safe-retries`),
 * copy examples/fastify-ledger to a temporary folder, `npm ci` its pinned dependencies there,
 * install the tarball (not the repository's sources), and run the example's own `npm test`
 * (type check against the package's .d.ts, then its jest suite with the 50-request race) on
 * a fresh database of this run's PostgreSQL.
 */
jest.setTimeout(10 * 60_000);

describe('the example app against the packed package (examples/fastify-ledger)', () => {
  let work: string;
  let app: string;
  let packDir: string;

  beforeAll(async () => {
    ({ work, app, packDir } = await installExample('fastify-ledger', ['safe-retries']));
  });

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('installs safe-retries from the tarball into the example, not from the repository', async () => {
    expect(readdirSync(packDir)).toEqual([expect.stringMatching(/^safe-retries-\d+\.\d+\.\d+.*\.tgz$/)]);
    expect(await resolvedFrom(app, 'safe-retries')).toBe(join(realpathSync(app), 'node_modules', 'safe-retries', 'dist', 'index.js'));
    const manifest = await run(process.execPath, ['-p', "JSON.stringify(require('safe-retries/package.json'))"], app);
    expect(JSON.parse(manifest.output)).toMatchObject({ name: 'safe-retries', main: './dist/index.js', types: './dist/index.d.ts' });
  });

  it("passes the example's own npm test (type check, then the race on Fastify with acct_ principals)", async () => {
    const { output, passed } = await runExampleTests(app);
    expect(passed).toBeGreaterThanOrEqual(8);
    expect(output).toMatch(/✓ writes one row for 50 identical requests at once/);
  });
});
