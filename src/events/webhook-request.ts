import http from 'node:http';
import https from 'node:https';
import { LookupFunction } from 'node:net';
import { RefusedAddressError, ResolvedAddress, publicAddresses } from '../addresses/public-address';

/** How long a connection (TCP and TLS) may take. */
export const CONNECT_TIMEOUT_MS = 5_000;
/** How long the endpoint may take to answer, once connected. */
export const RESPONSE_TIMEOUT_MS = 10_000;
/** The endpoint took too long: to accept the connection, or to answer once connected. */
export class AttemptTimeoutError extends Error {
  override name = 'AttemptTimeoutError';
  constructor(readonly phase: 'connect' | 'response') {
    super(phase === 'connect' ? `no connection within ${CONNECT_TIMEOUT_MS} ms` : `no complete answer within ${RESPONSE_TIMEOUT_MS} ms`);
  }
}

/** How much of an answer's body is kept with the attempt. */
export const EXCERPT_BYTES = 1_024;

export interface WebhookAnswer {
  status: number;
  excerpt: string;
  /** The answer's Retry-After header, as sent. */
  retryAfter?: string;
}

/**
 * POSTs one delivery. In production the host is resolved first (abandoned
 * when `signal` ends first) and every address it resolves to must be public
 * (publicAddresses), and the connection goes only to the addresses that were
 * checked (the request's lookup answers them), so a second resolution cannot
 * swap in another (DNS rebinding); Node tries them in turn (autoSelectFamily:
 * an unreachable IPv6 address, then IPv4). The Host header and TLS's SNI
 * still name the host. A fresh connection each time (no agent
 * pool): nothing checked earlier is reused. Connect and response times are
 * bounded; of the answer, the status, its Retry-After and at most
 * EXCERPT_BYTES are kept.
 */
export async function postWebhook(url: URL, headers: Record<string, string>, body: string, production: boolean, signal: AbortSignal): Promise<WebhookAnswer> {
  let pinned: ResolvedAddress[] | undefined;
  if (production) {
    if (url.protocol !== 'https:') throw new RefusedAddressError(`${url.protocol} is refused in production: https only`);
    pinned = await publicAddresses(url.hostname.replace(/^\[(.*)\]$/, '$1'), signal);
  }
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise<WebhookAnswer>((resolve, reject) => {
    const req = transport.request(url, {
      method: 'POST',
      agent: false,
      signal,
      headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      ...(pinned ? { lookup: pinnedLookup(pinned), autoSelectFamily: true } : {}),
    });
    let timer = setTimeout(() => req.destroy(new AttemptTimeoutError('connect')), CONNECT_TIMEOUT_MS);
    req.on('socket', (socket) => {
      socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer);
        timer = setTimeout(() => req.destroy(new AttemptTimeoutError('response')), RESPONSE_TIMEOUT_MS);
      });
    });
    req.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let kept = 0;
      const done = () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, excerpt: Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString('utf8'), retryAfter: res.headers['retry-after'] });
      };
      res.on('data', (chunk: Buffer) => {
        if (kept < EXCERPT_BYTES) chunks.push(chunk);
        kept += chunk.length;
        // Enough kept: the rest is not read.
        if (kept >= EXCERPT_BYTES) {
          done();
          res.destroy();
        }
      });
      res.on('end', done);
      res.on('error', done);
    });
    req.end(body);
  });
}

/** A lookup that answers the checked addresses, in either form Node asks for. */
export function pinnedLookup(pinned: readonly ResolvedAddress[]): LookupFunction {
  return (_host, options, callback) => {
    if ((options as { all?: boolean }).all) (callback as unknown as (error: null, addresses: ResolvedAddress[]) => void)(null, [...pinned]);
    else callback(null, pinned[0].address, pinned[0].family);
  };
}
