/**
 * When a failed delivery is tried again: exponential backoff with full jitter
 * (AWS's "Exponential Backoff and Jitter"). The n-th failure waits a random
 * time between 0 and min(CAP, BASE * 2^(n-1)): relays that failed together
 * (a receiver that was down) spread out instead of returning together.
 */
export const OUTBOX_BACKOFF = { baseMs: 1_000, capMs: 3_600_000 } as const;

/** The longest wait after the `failures`-th failed attempt (1-based). */
export function backoffCeilingMs(failures: number): number {
  const exponent = Math.min(Math.max(failures, 1) - 1, 32);
  return Math.min(OUTBOX_BACKOFF.capMs, OUTBOX_BACKOFF.baseMs * 2 ** exponent);
}

/** The wait after the `failures`-th failed attempt: uniform in [0, ceiling]. */
export function backoffMs(failures: number, random: () => number = Math.random): number {
  return Math.floor(random() * (backoffCeilingMs(failures) + 1));
}
