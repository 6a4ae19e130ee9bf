import { lookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { LookupFunction, isIP } from 'node:net';
import { isPublicAddress } from './public-address';

/** How long a connection (TCP and TLS) may take. */
export const CONNECT_TIMEOUT_MS = 5_000;
/** How long the endpoint may take to answer, once connected. */
export const RESPONSE_TIMEOUT_MS = 10_000;
/** How much of an answer's body is kept with the attempt. */
export const EXCERPT_BYTES = 1_024;

/** The endpoint's address is not a public one (production): nothing was sent. */
export class RefusedAddressError extends Error {
  override name = 'RefusedAddressError';
}

export interface WebhookAnswer {
  status: number;
  excerpt: string;
}

/**
 * POSTs one delivery. In production the host is resolved first and every
 * address it resolves to must be public (isPublicAddress), and the connection
 * goes to the address that was checked (the request's lookup answers it), so
 * a second resolution cannot swap in another (DNS rebinding); the Host header
 * and TLS's SNI still name the host. A fresh connection each time (no agent
 * pool): nothing checked earlier is reused. Connect and response times are
 * bounded; of the answer, the status and at most EXCERPT_BYTES are kept.
 */
export async function postWebhook(url: URL, headers: Record<string, string>, body: string, production: boolean, signal: AbortSignal): Promise<WebhookAnswer> {
  let pinned: { address: string; family: number } | undefined;
  if (production) {
    if (url.protocol !== 'https:') throw new RefusedAddressError(`${url.protocol} is refused in production: https only`);
    pinned = await publicAddress(url.hostname.replace(/^\[(.*)\]$/, '$1'));
  }
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise<WebhookAnswer>((resolve, reject) => {
    const req = transport.request(url, {
      method: 'POST',
      agent: false,
      signal,
      headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      ...(pinned ? { lookup: pinnedLookup(pinned) } : {}),
    });
    let timer = setTimeout(() => req.destroy(new Error(`no connection within ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS);
    req.on('socket', (socket) => {
      socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer);
        timer = setTimeout(() => req.destroy(new Error(`no complete answer within ${RESPONSE_TIMEOUT_MS} ms`)), RESPONSE_TIMEOUT_MS);
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
        resolve({ status: res.statusCode ?? 0, excerpt: Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString('utf8') });
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

async function publicAddress(host: string): Promise<{ address: string; family: number }> {
  const addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await lookup(host, { all: true, verbatim: true });
  const refused = addresses.find((a) => !isPublicAddress(a.address));
  if (refused) throw new RefusedAddressError(`${host} resolves to ${refused.address}, which is not a public address`);
  if (addresses.length === 0) throw new RefusedAddressError(`${host} resolves to no address`);
  return addresses[0];
}

/** A lookup that answers the checked address, in either form Node asks for. */
function pinnedLookup(pinned: { address: string; family: number }): LookupFunction {
  return (_host, options, callback) => {
    if ((options as { all?: boolean }).all) (callback as unknown as (error: null, addresses: { address: string; family: number }[]) => void)(null, [pinned]);
    else callback(null, pinned.address, pinned.family);
  };
}
