import { Inject, Injectable } from '@nestjs/common';
import { createHash, timingSafeEqual } from 'node:crypto';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { MetricsAccess, MetricsVerdict } from '../metrics/metrics-access';
import { bearerToken } from './api-key';
import { FailedAuthLimiter } from './failed-auth.limiter';

/**
 * Metrics name routes, error rates and pool sizes: useful to an attacker, so
 * they are read only with a token. The comparison is constant-time: both sides
 * are hashed to 32 bytes first, so neither the content nor the length leaks.
 */
function isMetricsTokenValid(authorization: string | undefined, token: string): boolean {
  const presented = bearerToken(authorization);
  if (presented === undefined) return false;
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(digest(presented), digest(token));
}

/**
 * The one check of the metrics token, for /metrics on the API port
 * (Authentication) and on its own port (MetricsServer): METRICS_TOKEN opens
 * /metrics (without one set, anyone who reaches it may read it: only
 * MetricsServer's own port, on loopback, serves it then), and a wrong or
 * missing token is a failed authentication of the address, on the budget of
 * FailedAuthLimiter (the same budget on both ports: a scraper guessing tokens
 * gains nothing by switching).
 */
@Injectable()
export class MetricsTokenAccess extends MetricsAccess {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly failedAuth: FailedAuthLimiter,
  ) {
    super();
  }

  check(authorization: string | undefined, address: string): MetricsVerdict {
    const { token } = this.config.metrics;
    if (token === undefined || isMetricsTokenValid(authorization, token)) return 'allowed';
    const blocked = this.failedAuth.fail(address);
    return blocked ? { retryAfterSeconds: Math.max(1, Math.ceil(blocked.blockedFor)) } : 'unauthorized';
  }
}
