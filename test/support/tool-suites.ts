/**
 * `describe` for suites that need a program npm does not install (redis-server,
 * pgbouncer, chromium: Debian packages, which .ci/run installs when missing).
 * With the program there, or under CI, the suite runs: CI must test it, so a
 * missing program fails there with the suite's own message naming the package.
 * Elsewhere it is skipped after one line saying what to install.
 */
export function suitesNeeding(suites: string, available: boolean, missing: string): jest.Describe {
  if (available || process.env.CI) return describe;
  process.stderr.write(`${suites} skipped: ${missing}\n`);
  return describe.skip;
}
