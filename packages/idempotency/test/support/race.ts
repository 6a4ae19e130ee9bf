import type { Test } from 'supertest';

/**
 * Helpers of the race suites. The requests are supertest's, as the project's
 * users write them (`request(server).post(...)` in `Promise.all`), each timed so
 * that the suite can show they really overlapped.
 */
export interface TimedResponse {
  status: number;
  headers: Record<string, string | undefined>;
  text: string;
  /** performance.now() when the request was sent and when its response ended. */
  started: number;
  ended: number;
  json<T = unknown>(): T;
}

/** Sends a supertest request and records when it started and ended. */
export async function timed(test: Test): Promise<TimedResponse> {
  const started = performance.now();
  const res = await test;
  const ended = performance.now();
  return {
    status: res.status,
    headers: res.headers as Record<string, string | undefined>,
    text: res.text,
    started,
    ended,
    json: <T>() => JSON.parse(res.text) as T,
  };
}

/** The most requests in flight at one instant. */
export function peakConcurrency(responses: TimedResponse[]): number {
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

export function histogram(responses: TimedResponse[]): Record<string, number> {
  const h: Record<string, number> = {};
  for (const r of responses) {
    const label = r.status === 201 && r.headers['idempotent-replayed'] === 'true' ? '201 replay' : String(r.status);
    h[label] = (h[label] ?? 0) + 1;
  }
  return h;
}
