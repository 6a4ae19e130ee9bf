import { Injectable, ServiceUnavailableException } from '@nestjs/common';
import { HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import type { HealthCheckResult, HealthIndicatorResult } from '@nestjs/terminus';
import { DatabasePing, PING_TIMEOUT_MS } from '../database/database-ping';
import { MetricsService } from '../metrics/metrics.service';

/** How long a check's result answers GET /health: the endpoint is public, and must not become a way to load the database. */
export const HEALTH_RESULT_TTL_MS = 1_000;

/** A finished database check: the result to answer 200 with, or `down` for a 503. */
export type HealthOutcome = { up: true; result: HealthCheckResult } | { up: false };

/**
 * The database check behind GET /health, run at most once a second however
 * many ask: Terminus's `cacheFor` keeps the check's result (up or down) until
 * it is HEALTH_RESULT_TTL_MS old, counted from when it finished, and the
 * requests that arrive while a check runs share that one check. A check still
 * running a second after it started (the database slower than that) no longer
 * holds back the next one, so a hanging database gets one new check a second.
 *
 * The check pings on a connection of its own (DatabasePing), never waiting
 * for one of the app's pool behind the requests of a busy moment.
 *
 * The cache lives in Terminus's HealthIndicatorService, shared by every
 * request; only the request whose attempt really ran the query counts it in
 * `health_checks_total`.
 */
@Injectable()
export class HealthService {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly database: DatabasePing,
    private readonly metrics: MetricsService,
  ) {}

  async check(): Promise<HealthOutcome> {
    let ran = false;
    const database = this.indicators
      .check('database')
      .attempt(async () => {
        ran = true;
        await this.database.ping();
      })
      .withTimeout(PING_TIMEOUT_MS)
      .cacheFor(HEALTH_RESULT_TTL_MS);
    const outcome = await this.outcome(() => database);
    if (ran) this.metrics.healthChecks.inc({ outcome: outcome.up ? 'up' : 'down' });
    return outcome;
  }

  private async outcome(database: () => PromiseLike<HealthIndicatorResult>): Promise<HealthOutcome> {
    try {
      return { up: true, result: withoutCacheMark(await this.health.check([database])) };
    } catch (error) {
      // Terminus's answer when an indicator fails: the database does not answer.
      if (!(error instanceof ServiceUnavailableException)) throw error;
      return { up: false };
    }
  }
}

/**
 * Terminus marks a result served from its cache (`cachedResponse: true`); every
 * request a check answers gets the same body, whether or not it ran the check.
 */
function withoutCacheMark(result: HealthCheckResult): HealthCheckResult {
  return { ...result, info: unmarked(result.info), error: unmarked(result.error), details: unmarked(result.details) };
}

function unmarked<T extends Partial<HealthIndicatorResult> | undefined>(indicators: T): T {
  if (indicators === undefined) return indicators;
  const entries = Object.entries(indicators).map(([key, detail]) => {
    const { cachedResponse: _cached, ...rest }: Record<string, unknown> = detail ?? {};
    return [key, rest];
  });
  return Object.fromEntries(entries) as T;
}
