import { realpathSync, rmSync } from 'node:fs';
import { join, sep } from 'node:path';
import { TestDatabase, createTestDatabase } from '../support/database';
import { REPO_ROOT } from '../support/dist';
import { expectSuccess, installExample, jestSummary, run } from '../support/example-app';

/**
 * The webhook consumer example as its users install it: safe-retries and
 * @safe-retries/client packed now and installed from their tarballs into a copy of
 * examples/webhook-consumer, whose own `npm test` (type check against the packages' .d.ts,
 * then its jest suite: Standard Webhooks deliveries posted 5 times and 20 at once, applied
 * once) runs on a fresh database of this run's PostgreSQL.
 */
jest.setTimeout(10 * 60_000);

describe('the webhook consumer example against the packed packages (examples/webhook-consumer)', () => {
  let work: string;
  let app: string;
  let db: TestDatabase | undefined;

  beforeAll(async () => {
    ({ work, app } = await installExample('webhook-consumer', ['safe-retries', '@safe-retries/client']));
  });

  afterAll(async () => {
    await db?.drop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('installs safe-retries and @safe-retries/client from their tarballs, not from the repository', async () => {
    for (const name of ['safe-retries', '@safe-retries/client']) {
      const r = await run(process.execPath, ['-p', `require('fs').realpathSync(require.resolve('${name}'))`], app);
      expectSuccess('require.resolve', r);
      const resolved = r.output.trim();
      expect(resolved).toBe(join(realpathSync(app), 'node_modules', name, 'dist', 'index.js'));
      expect(resolved.startsWith(REPO_ROOT + sep)).toBe(false);
    }
  });

  it("passes the example's own npm test (type check, then one effect per delivered event)", async () => {
    db = await createTestDatabase();
    const r = await run('npm', ['test'], app, { DATABASE_URL: db.url });
    expectSuccess("the example's npm test", r);
    const tests = jestSummary(r.output);
    expect({ failed: tests.failed, passed: tests.passed }).toEqual({ failed: 0, passed: tests.total });
    expect(tests.passed).toBeGreaterThanOrEqual(6);
    expect(r.output).toMatch(/✓ applies a delivery posted 20 times at once once/);
    expect(r.output).toMatch(/✓ the control: without IdempotentConsumer, the same 5 deliveries are applied 5 times/);
  });
});
