import { IncomingMessage, Server, ServerResponse, createServer, request as httpRequest } from 'node:http';
import { AddressInfo } from 'node:net';

/**
 * A small fault-injecting HTTP proxy in front of the real server, for the client's
 * e2e tests. Each incoming request takes the next planned fault (then `pass`):
 * - `pass`: forward and relay the response;
 * - `drop-response`: forward, wait until the server has answered (it committed),
 *   then destroy the client's socket: the response is lost;
 * - `unavailable`: answer 503 problem+json with Retry-After, without forwarding.
 */
export type Fault = 'pass' | 'drop-response' | 'unavailable';

export interface FaultProxy {
  url: string;
  plan(...faults: Fault[]): void;
  /** What each request got, in order. */
  seen: { method: string; path: string; key?: string; fault: Fault; upstreamStatus?: number }[];
  close(): Promise<void>;
}

export async function startFaultProxy(upstream: string, retryAfterSeconds = 1): Promise<FaultProxy> {
  const planned: Fault[] = [];
  const seen: FaultProxy['seen'] = [];
  const target = new URL(upstream);

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const fault = planned.shift() ?? 'pass';
    const entry: FaultProxy['seen'][number] = {
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      key: req.headers['idempotency-key'] as string | undefined,
      fault,
    };
    seen.push(entry);
    if (fault === 'unavailable') {
      req.resume();
      const body = JSON.stringify({ type: 'about:blank', title: 'Service Unavailable', status: 503, detail: 'injected', code: 'service_unavailable' });
      res.writeHead(503, { 'Content-Type': 'application/problem+json', 'Retry-After': String(retryAfterSeconds), Connection: 'close' });
      res.end(body);
      return;
    }
    const forward = httpRequest(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host }, agent: false },
      (upstreamRes) => {
        entry.upstreamStatus = upstreamRes.statusCode;
        const chunks: Buffer[] = [];
        upstreamRes.on('data', (c: Buffer) => chunks.push(c));
        upstreamRes.on('end', () => {
          if (fault === 'drop-response') {
            res.socket?.destroy();
            return;
          }
          res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
          res.end(Buffer.concat(chunks));
        });
      },
    );
    forward.on('error', () => res.socket?.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    plan: (...faults) => planned.push(...faults),
    seen,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
