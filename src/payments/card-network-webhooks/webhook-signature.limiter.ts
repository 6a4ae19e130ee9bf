import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import type { FastifyInstance } from 'fastify';
import { AddressBudget } from '../../auth/address-budget';
import { closeIfBodyUnread } from '../../auth/failed-auth.limiter';
import { sendProblem } from '../../http/http';
import { ProblemException, problems } from '../../http/problem';
import { routeAccess } from '../../http/route-access';
import { APP_CONFIG } from '../../config/config.module';
import type { AppConfig } from '../../config/config';
import type { NetworkEvent } from '../card-network/card-network';

declare module 'fastify' {
  interface FastifyRequest {
    /** The card network's event, once its signature verified (WebhookSignatureGuard). */
    webhookEvent?: NetworkEvent;
  }
}

/** Addresses counted at once below their budget (as FailedAuthLimiter's default). */
const MAX_COUNTED_ADDRESSES = 10_000;

/** Whether a Stripe-Signature header has the expected form, a timestamp and a v1 HMAC-SHA256 (whether it verifies is not known here). */
function looksSigned(header: string | string[] | undefined): boolean {
  if (typeof header !== 'string') return false;
  const parts = header.split(',').map((p) => p.trim());
  return parts.some((p) => /^t=\d{1,12}$/.test(p)) && parts.some((p) => /^v1=[0-9a-fA-F]{64}$/.test(p));
}

/**
 * Deliveries to a `signed` route (the card network's webhooks) that did not
 * verify, per client address: 60 a minute (config.rateLimit), a budget of
 * its own (AddressBudget), apart from the failed-auth limit, which never counts
 * nor blocks these routes. Every 4xx answered to a delivery whose signature
 * did not verify counts (a forged, stale or missing signature; a body over the
 * route's limit, not JSON, ...); a verified one never does (its 409 included).
 *
 * A blocked address is refused 429 before its body is read when the delivery
 * has no well-formed Stripe-Signature; one that has is read (within the route's
 * body limit) and verified, and passes if it verifies: the network's own
 * deliveries come from the same load balancer address as anyone's, so a flood
 * of forgeries must not stop them (WebhookSignatureGuard). Nothing here reaches
 * the database.
 */
@Injectable()
export class WebhookSignatureLimiter extends AddressBudget implements OnApplicationShutdown {
  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    super({
      limit: config.rateLimit.unauthenticatedPerMinute,
      maxCounted: MAX_COUNTED_ADDRESSES,
      failure: 'invalid webhook signature',
      failures: 'invalid webhook signatures',
      logger: new Logger('Webhooks'),
    });
  }

  /** The 429 of a delivery refused because its address is blocked (counted as a refusal). */
  refusal(seconds: number): ProblemException {
    this.recordRefusal();
    return problems.rateLimited(seconds, 'Too many webhook deliveries with an invalid signature from this address. Retry after Retry-After seconds.');
  }

  /** Adds the limiter's Fastify hooks: the refusal before the body is read, and the count of each failed delivery once answered. */
  install(fastify: FastifyInstance): void {
    fastify.addHook('onRequest', (request, reply, done) => {
      if (routeAccess(request) !== 'signed') return done();
      const seconds = this.blockedFor(request.ip);
      if (seconds === undefined || looksSigned(request.headers['stripe-signature'])) return done();
      closeIfBodyUnread(request, reply);
      sendProblem(reply, this.refusal(seconds));
    });
    fastify.addHook('onResponse', (request, reply, done) => {
      const status = reply.statusCode;
      if (routeAccess(request) === 'signed' && status >= 400 && status < 500 && status !== 429 && request.webhookEvent === undefined) {
        this.recordFailure(request.ip);
      }
      done();
    });
  }

  onApplicationShutdown(): void {
    this.stop();
  }
}
