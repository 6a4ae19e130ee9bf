import http from 'node:http';
import https from 'node:https';
import { LookupFunction } from 'node:net';
import { RefusedAddressError, ResolvedAddress, publicAddresses } from '../addresses/public-address';

/**
 * How long one attempt may take, all told: resolving the host, connecting
 * (TCP and TLS) and the whole answer, under one deadline.
 */
export const ATTEMPT_TIMEOUT_MS = 15_000;
/** The attempt's deadline passed, and where the attempt was then. */
export class AttemptTimeoutError extends Error {
  override name = 'AttemptTimeoutError';
  constructor(readonly phase: 'dns' | 'connect' | 'response') {
    super(`${phase === 'dns' ? 'no DNS answer' : phase === 'connect' ? 'no connection' : 'no complete answer'} within the attempt's ${ATTEMPT_TIMEOUT_MS} ms`);
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
 * POSTs one delivery. In production the host is resolved first and every
 * address it resolves to must be public (publicAddresses), and the connection
 * goes only to the addresses that were checked (the request's lookup answers
 * them), so a second resolution cannot swap in another (DNS rebinding); Node
 * tries them in turn (autoSelectFamily: an unreachable IPv6 address, then
 * IPv4). The Host header and TLS's SNI still name the host. A fresh
 * connection each time (no agent pool): nothing checked earlier is reused.
 * One deadline (ATTEMPT_TIMEOUT_MS, or `signal` when it ends first) covers
 * the whole attempt: a lookup still running then is abandoned
 * (AttemptTimeoutError 'dns'), a connection or an answer still coming is
 * destroyed. Of the answer, the status, its Retry-After and at most
 * EXCERPT_BYTES are kept.
 */
export async function postWebhook(url: URL, headers: Record<string, string>, body: string, production: boolean, signal: AbortSignal): Promise<WebhookAnswer> {
  let phase: AttemptTimeoutError['phase'] = production ? 'dns' : 'connect';
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new AttemptTimeoutError(phase)), ATTEMPT_TIMEOUT_MS);
  const ends = AbortSignal.any([signal, deadline.signal]);
  try {
    let pinned: ResolvedAddress[] | undefined;
    if (production) {
      if (url.protocol !== 'https:') throw new RefusedAddressError(`${url.protocol} is refused in production: https only`);
      pinned = await publicAddresses(url.hostname.replace(/^\[(.*)\]$/, '$1'), ends);
      phase = 'connect';
    }
    return await request(url, headers, body, pinned, ends, () => (phase = 'response'));
  } finally {
    clearTimeout(timer);
  }
}

/** The request itself, ended by `ends` (its reason is the error); `connected` is called once the connection is up. */
function request(
  url: URL,
  headers: Record<string, string>,
  body: string,
  pinned: ResolvedAddress[] | undefined,
  ends: AbortSignal,
  connected: () => void,
): Promise<WebhookAnswer> {
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise<WebhookAnswer>((resolve, reject) => {
    ends.throwIfAborted();
    const req = transport.request(url, {
      method: 'POST',
      agent: false,
      headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      ...(pinned ? { lookup: pinnedLookup(pinned), autoSelectFamily: true } : {}),
    });
    const end = () => req.destroy(ends.reason as Error);
    ends.addEventListener('abort', end, { once: true });
    const settled = () => ends.removeEventListener('abort', end);
    req.on('socket', (socket) => socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', connected));
    req.on('error', (error) => {
      settled();
      reject(error);
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let kept = 0;
      const done = () => {
        settled();
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
