import { realpathSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { installExample, resolvedFrom, runExampleTests } from '../support/example-app';

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

  beforeAll(async () => {
    ({ work, app } = await installExample('webhook-consumer', ['safe-retries', '@safe-retries/client']));
  });

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('installs safe-retries and @safe-retries/client from their tarballs, not from the repository', async () => {
    for (const name of ['safe-retries', '@safe-retries/client']) {
      expect(await resolvedFrom(app, name)).toBe(join(realpathSync(app), 'node_modules', name, 'dist', 'index.js'));
    }
  });

  it("passes the example's own npm test (type check, then one effect per delivered event)", async () => {
    const { output, passed } = await runExampleTests(app);
    expect(passed).toBeGreaterThanOrEqual(6);
    expect(output).toMatch(/✓ applies a delivery posted 20 times at once once/);
    expect(output).toMatch(/✓ the control: without IdempotentConsumer, the same 5 deliveries are applied 5 times/);
  });
});
