import { Logger } from '@nestjs/common';
import type { FastifyInstance } from 'fastify';
import { isPrivateAddress } from '../addresses/client-address';
import type { AppConfig } from '../config/config';

/**
 * With HTTP_TRUST_PROXY empty, the address the failed-auth limits count is the
 * peer's. A peer in a private range is most likely a load balancer or proxy:
 * then every client behind it shares one address and one budget (valid keys
 * still pass). Said once, on the first request from such a peer (loopback
 * aside: a proxy on the same host is a deliberate setup).
 */
export function warnOfUntrustedProxy(fastify: FastifyInstance, config: AppConfig): void {
  if (config.http.trustProxy.length > 0) return;
  const logger = new Logger('Auth');
  let warned = false;
  fastify.addHook('onRequest', (request, _reply, done) => {
    const peer = request.socket.remoteAddress;
    if (!warned && peer !== undefined && isPrivateAddress(peer)) {
      warned = true;
      logger.warn(
        { peer },
        `requests come from the private address ${peer} and HTTP_TRUST_PROXY is empty: if it is a load balancer or proxy, every client behind it shares its address for the failed-auth limits; list your proxies in HTTP_TRUST_PROXY`,
      );
    }
    done();
  });
}

/** Connections one address must hold before it is taken for a proxy: a browser opens six, a balancer many. */
const DOMINANT_MIN_CONNECTIONS = 16;
/** The warning below is repeated at most this often while the address keeps most connections. */
const DOMINANT_WARNING_INTERVAL_MS = 10 * 60_000;

/**
 * The ConnectionEvents `dominant` of the HTTP server: an address outside
 * HTTP_TRUST_PROXY that holds more than half the open connections (at least
 * DOMINANT_MIN_CONNECTIONS) is most likely a load balancer or proxy, loopback and
 * public ones included: every client behind it shares its failed-auth budget
 * and, once the server is full, one address's share of the connections. Said at
 * most every ten minutes; the share is also a gauge
 * (http_connections_largest_untrusted_share).
 */
export function warnOfDominantAddress(config: AppConfig): (address: string, held: number, open: number) => void {
  const logger = new Logger('Connections');
  let warnedAt = -Infinity;
  return (address, held, open) => {
    const now = performance.now();
    if (held < DOMINANT_MIN_CONNECTIONS || now - warnedAt < DOMINANT_WARNING_INTERVAL_MS) return;
    warnedAt = now;
    const trusted = config.http.trustProxy.length ? `HTTP_TRUST_PROXY (${config.http.trustProxy.join(',')}) does not hold it` : 'HTTP_TRUST_PROXY is empty';
    logger.warn(
      { address, held, open },
      `${address} holds ${held} of the ${open} open connections and ${trusted}: if it is a load balancer or proxy, every client behind it shares its address for the failed-auth limits and for its share of the connections once the server is full; list your proxies in HTTP_TRUST_PROXY`,
    );
  };
}
