import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { backoffCeilingMs, backoffMs } from '../../src/outbox/backoff';

/**
 * The outbox's retry schedule: full jitter under a doubling ceiling, capped;
 * and the schedule docs/outbox.md publishes is the one the code runs.
 */
describe('the outbox retry schedule', () => {
  it('waits uniformly between 0 and a ceiling that doubles from 1 s up to 1 h', () => {
    expect([1, 2, 3, 12, 13, 40, 1_000].map(backoffCeilingMs)).toEqual([1_000, 2_000, 4_000, 2_048_000, 3_600_000, 3_600_000, 3_600_000]);
    expect(backoffMs(5, () => 0)).toBe(0);
    expect(backoffMs(5, () => 0.999_999_999)).toBe(16_000);
    expect(backoffMs(5, () => 0.5)).toBe(8_000);
  });

  it('is the schedule docs/outbox.md publishes', () => {
    const page = readFileSync(resolve(__dirname, '../../docs/outbox.md'), 'utf8');
    const rows = [...page.matchAll(/^\| (\d+)(?: and later)? \| (\d+) \| (\d+|one hour more each) \|$/gm)];
    expect(rows.length).toBe(13);
    let latest = 0;
    for (const [, failure, within, at] of rows) {
      const ceiling = backoffCeilingMs(Number(failure)) / 1000;
      latest += ceiling;
      expect(Number(within)).toBe(ceiling);
      if (at !== 'one hour more each') expect(Number(at)).toBe(latest);
    }
  });
});
