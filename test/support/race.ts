import { RawResponse } from './http-client';

/** Helpers of the race suites: requests come from http-client's send() (one socket each). */

/** The most requests in flight at one instant. */
export function peakConcurrency(responses: RawResponse[]): number {
  const events = responses.flatMap((r) => [
    { t: r.started, d: 1 },
    { t: r.ended, d: -1 },
  ]);
  events.sort((a, b) => a.t - b.t || a.d - b.d);
  let now = 0;
  let peak = 0;
  for (const e of events) peak = Math.max(peak, (now += e.d));
  return peak;
}

export function histogram(responses: RawResponse[]): Record<string, number> {
  const h: Record<string, number> = {};
  for (const r of responses) {
    const label = r.status === 201 && r.headers['idempotent-replayed'] === 'true' ? '201 replay' : String(r.status);
    h[label] = (h[label] ?? 0) + 1;
  }
  return h;
}
