/**
 * When to retry and how long to wait. Pure functions, no timers: the client
 * composes them, the tests sample them.
 *
 * Backoff is exponential with full jitter (every wait is uniform in [0, cap]) so a
 * crowd of callers that failed together does not retry together. A server's
 * `Retry-After` beats our guess: the server knows when its lease expires or its
 * rate window reopens.
 */

/**
 * Statuses retried by default: 409 (our server's "request with this key still in
 * progress" / "lease lost"), 429 (rate limited), 502/503/504 (gateway or server
 * temporarily unavailable). 500 is not: an unexpected server error is not known
 * to be transient.
 */
export const DEFAULT_RETRY_STATUSES: readonly number[] = Object.freeze([409, 429, 502, 503, 504]);

/** The largest delay `setTimeout` honours; longer values fire immediately. */
export const MAX_TIMER_DELAY_MS = 2_147_483_647;

/**
 * The wait before retry number `attempt` (0 for the first retry): uniform in
 * `[0, min(maxDelayMs, baseDelayMs * 2^attempt)]`, in whole milliseconds.
 *
 * @param random - a source of numbers in [0, 1); injectable for tests.
 */
export function backoffDelay(attempt: number, baseDelayMs: number, maxDelayMs: number, random: () => number = Math.random): number {
  const cap = backoffCap(attempt, baseDelayMs, maxDelayMs);
  const r = Math.min(Math.max(random(), 0), 1);
  // floor(r * (cap + 1)) spreads [0, 1) evenly over the integers 0..cap; the min
  // keeps an injected random() that returns exactly 1 inside the bound.
  return Math.min(Math.floor(r * (cap + 1)), cap);
}

/** The upper bound of {@link backoffDelay} for a given retry number. */
export function backoffCap(attempt: number, baseDelayMs: number, maxDelayMs: number): number {
  const exponent = Math.max(0, Math.floor(attempt));
  // 2 ** exponent overflows to Infinity past 1023 and 0 * Infinity is NaN: a zero
  // base stays zero, a positive one saturates at maxDelayMs.
  const growth = baseDelayMs > 0 ? baseDelayMs * 2 ** exponent : 0;
  const cap = Math.min(Math.max(0, maxDelayMs), growth);
  return Math.floor(Math.min(cap, MAX_TIMER_DELAY_MS));
}

/** Whether a response status is worth retrying with the same key and body. */
export function isRetryableStatus(status: number, retryStatuses: readonly number[] = DEFAULT_RETRY_STATUSES): boolean {
  return retryStatuses.includes(status);
}

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const LONG_DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const DAY = DAYS.join('|');
const MONTH = MONTHS.join('|');
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';

// RFC 9110 §5.6.7: recipients accept all three HTTP-date forms.
const IMF_FIXDATE = new RegExp(`^(?:${DAY}), (\\d{2}) (${MONTH}) (\\d{4}) ${TIME} GMT$`);
const RFC850_DATE = new RegExp(`^(?:${LONG_DAYS.join('|')}), (\\d{2})-(${MONTH})-(\\d{2}) ${TIME} GMT$`);
const ASCTIME_DATE = new RegExp(`^(?:${DAY}) (${MONTH}) ([ \\d]\\d) ${TIME} (\\d{4})$`);
const DELTA_SECONDS = /^\d+$/;

/**
 * Parses a `Retry-After` header into milliseconds from `now`.
 *
 * Accepts delta-seconds (`120`) and the three HTTP-date forms of RFC 9110; a date
 * in the past means "now" (0). Returns `undefined` for a missing or malformed
 * value (`-5`, `1.5`, `soon`), so the caller falls back to its own backoff.
 * The result is not capped: capping is the caller's policy.
 *
 * We parse dates ourselves rather than with `Date.parse`, which accepts nearly
 * anything (V8 reads `-5` as a date in 2001) and reads asctime dates as local time.
 */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (value === null || value === undefined) return undefined;
  const trimmed = value.trim();
  if (DELTA_SECONDS.test(trimmed)) return Number(trimmed) * 1000;
  const date = parseHttpDate(trimmed, now);
  if (date === undefined) return undefined;
  return Math.max(0, date - now);
}

function parseHttpDate(value: string, now: number): number | undefined {
  let m = IMF_FIXDATE.exec(value);
  if (m) return utc(Number(m[3]), m[2], Number(m[1]), m[4], m[5], m[6]);
  m = ASCTIME_DATE.exec(value);
  if (m) return utc(Number(m[6]), m[1], Number(m[2].trim()), m[3], m[4], m[5]);
  m = RFC850_DATE.exec(value);
  if (m) {
    // A two-digit year more than 50 years in the future is in the past century.
    const currentYear = new Date(now).getUTCFullYear();
    let year = Math.floor(currentYear / 100) * 100 + Number(m[3]);
    if (year > currentYear + 50) year -= 100;
    return utc(year, m[2], Number(m[1]), m[4], m[5], m[6]);
  }
  return undefined;
}

function utc(year: number, monthName: string, day: number, hh: string, mm: string, ss: string): number | undefined {
  const month = MONTHS.indexOf(monthName);
  const [hours, minutes, seconds] = [Number(hh), Number(mm), Number(ss)];
  if (hours > 23 || minutes > 59 || seconds > 60) return undefined;
  const time = Date.UTC(year, month, day, hours, minutes, Math.min(seconds, 59));
  // Date.UTC rolls 31 Feb over to March: refuse dates that do not exist.
  if (new Date(time).getUTCDate() !== day) return undefined;
  return time;
}
