import { request as httpRequest } from 'node:http';

/**
 * Fires N requests at once, each on its own socket (no agent, no keep-alive),
 * recording when each started and ended, so a test can show they overlapped.
 */
export interface TimedResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  started: number;
  ended: number;
}

export function send(url: string, method: string, path: string, headers: Record<string, string>, body?: string): Promise<TimedResponse> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest(new URL(path, url), { method, headers: { ...headers, Connection: 'close' }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), started, ended: performance.now() }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    if (body !== undefined) req.setHeader('Content-Length', Buffer.byteLength(body));
    req.end(body);
  });
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
