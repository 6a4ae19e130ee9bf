import type { IncomingMessage, Server } from 'node:http';
import { metricsAuth } from './app';
import { send, waitFor } from './http-client';

/** The payments_admission gauge of an app: its charge requests in flight and queued. */
export async function admission(baseUrl: string): Promise<{ inFlight: number; queued: number }> {
  const res = await send(baseUrl, { path: '/metrics', headers: metricsAuth() });
  const value = (state: string) => Number(new RegExp(`^payments_admission\\{state="${state}"\\} (\\d+)`, 'm').exec(res.text)?.[1]);
  return { inFlight: value('in_flight'), queued: value('queued') };
}

/** Waits until the gauge reads exactly these figures. */
export function admissionReads(baseUrl: string, expected: { inFlight: number; queued: number }): Promise<true> {
  return waitFor(`payments_admission ${JSON.stringify(expected)}`, async () => {
    const now = await admission(baseUrl);
    return now.inFlight === expected.inFlight && now.queued === expected.queued;
  });
}

/**
 * Counts the requests an app's HTTP server has received (their headers parsed and
 * handed to Fastify), to wait for requests whose answer will not come soon.
 */
export function countArrivals(server: Server, method = 'POST'): { readonly count: number; stop(): void } {
  let count = 0;
  const listener = (req: IncomingMessage) => void (req.method === method && count++);
  server.on('request', listener);
  return {
    get count() {
      return count;
    },
    stop: () => void server.off('request', listener),
  };
}
