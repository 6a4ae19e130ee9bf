/**
 * The durations of main.ts's environment, written as operators write them:
 * `50ms`, `1s`, `15m`, `24h`, `30d`; a bare integer is milliseconds. The
 * simulator is a tool of its own, so it reads them itself rather than through
 * the service's or the library's configuration.
 */
const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Milliseconds, or a RangeError naming the accepted forms. */
export function parseDuration(value: string): number {
  const match = /^(\d+)(ms|s|m|h|d)?$/.exec(value.trim());
  if (!match) throw new RangeError(`invalid duration "${value}": expected e.g. 500ms, 30s, 15m, 24h or 30d`);
  const ms = Number(match[1]) * UNIT_MS[match[2] ?? 'ms'];
  if (!Number.isSafeInteger(ms)) throw new RangeError(`invalid duration "${value}": too large`);
  return ms;
}
