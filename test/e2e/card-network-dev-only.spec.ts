import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { REPO_ROOT, builtFile } from '../support/dist';

/**
 * The card network simulator is a development and test tool: the built app
 * loads it only with the import() of CardNetworkModule, taken when there is no
 * CARD_NETWORK_URL (which production refuses). Every module the app's root
 * module reaches, which is what a production process loads, leaves it out; the
 * same package name, imported, is seen (the check can tell).
 */
describe('the built app reaches the card network simulator only through import() (e2e)', () => {
  it("loads none of the simulator's modules with the app's; importing it by name loads them", async () => {
    const script = `
      require(${JSON.stringify(builtFile('src/app.module.js'))});
      const loaded = () => Object.keys(require.cache).filter((file) => file.includes('card-network-simulator')).length;
      const withTheApp = loaded();
      import('@safe-retries/card-network-simulator').then((simulator) => {
        console.log(JSON.stringify({ withTheApp, imported: loaded(), start: typeof simulator.startCardNetworkSimulator }));
      });
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ['-e', script], { cwd: REPO_ROOT, env: { PATH: process.env.PATH ?? '' }, timeout: 60_000 });
    const seen = JSON.parse(stdout.trim().split('\n').pop()!) as { withTheApp: number; imported: number; start: string };
    expect(seen.withTheApp).toBe(0);
    expect(seen.imported).toBeGreaterThan(0);
    expect(seen.start).toBe('function');
  });
});
