/**
 * An endpoint that keeps failing is paused as a whole, not hammered: after
 * FAILURES_BEFORE_PAUSE failed attempts in a row (of any of its messages), or
 * a 429's or 503's Retry-After, its deliveries are held until `next_probe_at`;
 * then one delivery (the probe) goes, and its success resumes them all, its
 * failure pauses the endpoint again (1 min, doubling, at most 1 h; a
 * Retry-After, at most 1 h too). Held deliveries make no attempt: they keep
 * their own place in the retry schedule (src/events/webhook-schedule.ts). A
 * 410 Gone disables the endpoint at once; failing with no success for
 * DISABLE_AFTER disables it at its next failed attempt. Times are the
 * database's.
 */

/** Failed attempts in a row after which the endpoint is paused as a whole. */
export const FAILURES_BEFORE_PAUSE = 5;
/** The pause after the n-th failure from FAILURES_BEFORE_PAUSE on: 1 min, doubling, at most 1 h; a Retry-After is held to the same hour. */
export const PAUSE_S = { first: 60, max: 3600 } as const;
/** How long one probe holds the paused endpoint (longer than an attempt's 15 s): if its process dies, another probe goes after it. */
export const PROBE_LEASE_S = 60;
/** An endpoint failing this long, with no success, is disabled at its next failed attempt. */
export const DISABLE_AFTER = '5 days';

