import { IncomingHttpHeaders, request } from 'node:http';

export { waitFor } from '../../packages/idempotency/test/support/wait-for';

/**
 * One HTTP request on its own TCP connection (`agent: false`, Connection: close):
 * no keep-alive pool can serialise concurrent requests or hide a dropped socket.
 */
export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  /** Milliseconds from sending to the end of the response. */
  ms: number;
  /** performance.now() when the request was sent and when its response ended (to show overlap). */
  started: number;
  ended: number;
  json<T = unknown>(): T;
}

export interface RawRequest {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: unknown;
  /** Gives up (rejects) when no complete response arrived in time. */
  timeoutMs?: number;
}

export function send(baseUrl: string, options: RawRequest): Promise<RawResponse> {
  const url = new URL(options.path, baseUrl);
  const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
  const headers: Record<string, string> = { Connection: 'close', Accept: 'application/json', ...options.headers };
  if (payload) {
    headers['Content-Type'] = 'application/json';
    headers['Content-Length'] = String(payload.length);
  }
  const started = performance.now();
  const timeoutMs = options.timeoutMs ?? 30_000;
  return new Promise((resolveResponse, reject) => {
    const req = request(url, { method: options.method ?? 'GET', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        clearTimeout(timer);
        const text = Buffer.concat(chunks).toString('utf8');
        const ended = performance.now();
        resolveResponse({
          status: res.statusCode ?? 0,
          headers: res.headers,
          text,
          ms: ended - started,
          started,
          ended,
          json: () => JSON.parse(text),
        });
      });
    });
    const timer = setTimeout(() => {
      req.destroy(new Error(`${options.method ?? 'GET'} ${options.path}: no response within ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.end(payload);
  });
}

/** Authorization plus Idempotency-Key (when given) for the fault suites' client. */
export function authHeaders(apiKey: string, idempotencyKey?: string): Record<string, string> {
  return { Authorization: `Bearer ${apiKey}`, ...(idempotencyKey ? { 'Idempotency-Key': idempotencyKey } : {}) };
}
