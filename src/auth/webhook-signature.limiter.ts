import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { ProblemException, problems } from '../http/problem';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { AddressBudget } from './address-budget';

/** Addresses counted at once below their budget (as FailedAuthLimiter's default). */
const MAX_COUNTED_ADDRESSES = 10_000;

/**
 * Deliveries to a `signed` route (the card network's webhooks) that did not
 * verify, per client address: 60 a minute (config.rateLimit), a budget of
 * its own (AddressBudget), apart from the failed-auth limit, which never counts
 * nor blocks these routes. Every 4xx answered to a delivery whose signature
 * did not verify counts (a forged, stale or missing signature; a body over the
 * route's limit, not JSON, signed bytes that are not an event, ...); a
 * verified one never does (its 409 included).
 *
 * Why apart, and why it never blocks a delivery that verifies: the network's
 * own deliveries come from the same load balancer address as anyone's, so a
 * flood of forgeries must not stop them, nor must a flood of keyless requests.
 * A blocked address is refused 429 before its body is read when the delivery
 * has no well-formed signature; one that has is read (within the route's body
 * limit) and verified, and passes if it verifies (Authentication). Nothing
 * here reaches the database.
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

  onApplicationShutdown(): void {
    this.stop();
  }
}
