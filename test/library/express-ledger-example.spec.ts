import { realpathSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { installExample, resolvedFrom, runExampleTests } from '../support/example-app';

/**
 * The smallest Express app as its users install it: safe-retries packed now and installed
 * from its tarball into a copy of examples/express-ledger, whose own `npm test` (type check
 * against the package's .d.ts, then the 100-request race and its control) runs on a fresh
 * database of this run's PostgreSQL.
 */
jest.setTimeout(10 * 60_000);

describe('the Express example against the packed package (examples/express-ledger)', () => {
  let work: string;
  let app: string;

  beforeAll(async () => {
    ({ work, app } = await installExample('express-ledger', ['safe-retries']));
  });

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('installs safe-retries from the tarball, not from the repository', async () => {
    expect(await resolvedFrom(app, 'safe-retries')).toBe(join(realpathSync(app), 'node_modules', 'safe-retries', 'dist', 'index.js'));
  });

  it("passes the example's own npm test: one row for 100 identical requests, and the control that can fail", async () => {
    const { output, passed } = await runExampleTests(app);
    expect(passed).toBe(2);
    expect(output).toMatch(/✓ writes one row for 100 identical requests at once/);
    expect(output).toMatch(/✓ the control: the same 100 requests to the handler without @Idempotent\(\) write 100 rows/);
  });
});
