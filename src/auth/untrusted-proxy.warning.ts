import { Logger } from '@nestjs/common';
import type { FastifyInstance } from 'fastify';
import { isPrivateAddress } from '../common/client-address';
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
