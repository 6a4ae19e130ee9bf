/**
 * Durations in the module options and in `@Idempotent({ lease, retention })` are written the
 * way operators say them: `500ms`, `30s`, `15m`, `24h`, `30d`. A bare integer is
 * milliseconds. Parsing happens once, at boot or at decoration time.
 */
const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

const DURATION = /^(\d+)(ms|s|m|h|d)?$/;

export type Duration = string | number;

/** Returns milliseconds, or throws a RangeError naming the accepted forms. */
export function parseDuration(value: Duration): number {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`invalid duration ${value}: expected a non-negative integer of milliseconds`);
    }
    return value;
  }
  const match = DURATION.exec(value.trim());
  if (!match) {
    throw new RangeError(`invalid duration "${value}": expected e.g. 500ms, 30s, 15m, 24h or 30d`);
  }
  const ms = Number(match[1]) * UNIT_MS[match[2] ?? 'ms'];
  if (!Number.isSafeInteger(ms)) {
    throw new RangeError(`invalid duration "${value}": too large`);
  }
  return ms;
}

/**
 * Formats milliseconds back to the largest exact unit for documentation, the
 * way people write retention: hours up to a week (24h, 72h), then days (30d).
 */
export function formatDuration(ms: number): string {
  if (ms >= 7 * UNIT_MS.d && ms % UNIT_MS.d === 0) return `${ms / UNIT_MS.d}d`;
  for (const unit of ['h', 'm', 's'] as const) {
    if (ms >= UNIT_MS[unit] && ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  }
  return `${ms}ms`;
}
