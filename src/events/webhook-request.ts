import http from 'node:http';
import https from 'node:https';
import { LookupFunction } from 'node:net';
import { HostResolver } from '../addresses/host-resolver';
import { RefusedAddressError, ResolvedAddress, publicAddresses, resolvedAddresses } from '../addresses/public-address';

/**
 * How long one attempt may take, all told: resolving the host, connecting
 * (TCP and TLS) and the whole answer, under one deadline.
 */
export const ATTEMPT_TIMEOUT_MS = 15_000;
/** The attempt's deadline passed (after `ms`), and where the attempt was then. */
export class AttemptTimeoutError extends Error {
  override name = 'AttemptTimeoutError';
  constructor(
    readonly phase: 'dns' | 'connect' | 'response',
    ms: number,
  ) {
    super(`${phase === 'dns' ? 'no DNS answer' : phase === 'connect' ? 'no connection' : 'no complete answer'} within the attempt's ${ms} ms`);
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
 * POSTs one delivery. The host is resolved first (`resolver`), and the
 * connection goes only to the addresses it answered (the request's lookup
 * answers them), each in turn (autoSelectFamily: an unreachable IPv6 address,
 * then IPv4). In production every one of them must be public
 * (publicAddresses), so a second resolution cannot swap in another (DNS
 * rebinding). The Host header and TLS's SNI still name the host. A fresh
 * connection each time (no agent pool): nothing checked earlier is reused.
 * One deadline covers the whole attempt: ATTEMPT_TIMEOUT_MS, or `signal`
 * (the relay's lease) when it ends first. A lookup still running then is
 * abandoned, a connection or an answer still coming is destroyed, and the
 * attempt fails with AttemptTimeoutError, naming where it was ('dns',
 * 'connect', 'response'). Of the answer, the status, its Retry-After and at
 * most EXCERPT_BYTES are kept.
 */
export async function postWebhook(
  url: URL,
  headers: Record<string, string>,
  body: string,
  production: boolean,
  signal: AbortSignal,
  resolver: HostResolver,
): Promise<WebhookAnswer> {
  let phase: AttemptTimeoutError['phase'] = 'dns';
  const started = performance.now();
  const deadline = new AbortController();
  const end = (ms = Math.round(performance.now() - started)) => deadline.abort(new AttemptTimeoutError(phase, ms));
  const timer = setTimeout(() => end(ATTEMPT_TIMEOUT_MS), ATTEMPT_TIMEOUT_MS);
  const leaseEnded = () => end();
  signal.addEventListener('abort', leaseEnded, { once: true });
  if (signal.aborted) end();
  const ends = deadline.signal;
  try {
    if (production && url.protocol !== 'https:') throw new RefusedAddressError(`${url.protocol} is refused in production: https only`);
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const pinned = await (production ? publicAddresses : resolvedAddresses)(host, resolver, ends);
    phase = 'connect';
    return await request(url, headers, body, pinned, ends, () => (phase = 'response'));
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', leaseEnded);
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
