/**
 * When a failed delivery of a message is tried again (the endpoint's own
 * pause and disabling: endpoint-pacing.ts). Times are the database's: these
 * are durations its statements add to now() and to the first attempt's time.
 *
 * The waits between attempts are Svix's (immediately, 5 s, 5 min, 30 min,
 * 2 h, 5 h, 10 h, then every 10 h), counted from the first attempt and cut
 * where the next would pass 71 h: 12 attempts, the last 67 h 35 min 5 s after
 * the first, all before the outbox's 3-day horizon. A retry goes at the first
 * step still ahead, and never before a 429's or 503's Retry-After: at the
 * first step at or after the time it names, or, named past the last step, at
 * the last step (the message would otherwise die untried at the horizon: one
 * early request costs the receiver less than a lost event). A Retry-After
 * shorter than the next step changes nothing: a receiver cannot make us send
 * sooner than the schedule.
 */

/** The waits between a message's attempts: Svix's, then every 10 h. */
const WAITS_S = [5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, ...Array<number>(10).fill(10 * 3600)];
/**
 * The window a message's retries fit in: the outbox's horizon (3 days), less
 * the hour its endpoint's pause may hold a retry past its step.
 */
const RETRY_WINDOW_S = 71 * 3600;

/** Seconds from a message's first attempt to each retry (11 retries: 12 attempts in all). */
export const RETRY_OFFSETS_S: readonly number[] = WAITS_S.map((_, i) => WAITS_S.slice(0, i + 1).reduce((a, b) => a + b, 0)).filter((at) => at <= RETRY_WINDOW_S);

/** The statuses whose Retry-After is honoured. */
const RETRY_AFTER_STATUSES = new Set([429, 503]);

/**
 * A Retry-After header of a 429 or 503, as the time it names: `{ seconds }`
 * (delta-seconds, added to the database's now()) or `{ at }` (an HTTP date,
 * the receiver's own clock, as ISO 8601); undefined when absent or malformed.
 */
export function retryAfter(status: number, header: string | undefined): { seconds: number } | { at: string } | undefined {
  if (!RETRY_AFTER_STATUSES.has(status) || header === undefined) return undefined;
  const value = header.trim();
  if (/^\d{1,10}$/.test(value)) return { seconds: Number(value) };
  const at = Date.parse(value);
  return /[a-z]/i.test(value) && Number.isFinite(at) ? { at: new Date(at).toISOString() } : undefined;
}
