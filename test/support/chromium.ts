// Headless Chromium for the suites that drive a real browser: Debian's
// `chromium` package (on PATH), driven by playwright-core, which downloads no
// browser of its own. Without it, those suites skip with one line naming the
// package (suitesNeeding), except under CI, where launchChromium() fails with it.
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { Browser, chromium } from 'playwright-core';

export const CHROMIUM_MISSING =
  'The browser suite needs Chromium: install chromium (Debian/Ubuntu: apt-get install -y chromium; .ci/run does)';

/** The absolute path of `chromium` on PATH, or undefined. */
export function chromiumBinary(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    const candidate = join(dir, 'chromium');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not in this folder.
    }
  }
  return undefined;
}

export async function launchChromium(): Promise<Browser> {
  const executablePath = chromiumBinary();
  if (!executablePath) throw new Error(CHROMIUM_MISSING);
  return chromium.launch({
    executablePath,
    headless: true,
    // Playwright's documented switch for --no-sandbox, which Chromium requires as root
    // (CI runs as root) and in containers without user namespaces.
    chromiumSandbox: false,
    // A container's /dev/shm may be tiny (Docker: 64 MB); Chromium then crashes pages.
    args: ['--disable-dev-shm-usage'],
  });
}
