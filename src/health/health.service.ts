import { Injectable, ServiceUnavailableException } from '@nestjs/common';
import { HealthCheckService, TypeOrmHealthIndicator } from '@nestjs/terminus';
import type { HealthCheckResult } from '@nestjs/terminus';
import { MetricsService } from '../metrics/metrics.service';

/** How long a check's result answers GET /health: the endpoint is public, and must not become a way to load the database. */
export const HEALTH_RESULT_TTL_MS = 1_000;

/** A finished database check: the result to answer 200 with, or `down` for a 503. */
export type HealthOutcome = { up: true; result: HealthCheckResult } | { up: false };

/**
 * The database check behind GET /health, run at most once a second however
 * many ask: a result is served until it is HEALTH_RESULT_TTL_MS old (counted
 * from when it finished, on a monotonic clock), and the requests that arrive
 * while a check runs wait for that one check. An unexpected error (not the
 * database being down) is not kept: the next request checks again.
 */
@Injectable()
export class HealthService {
  private last?: { finishedAt: number; outcome: HealthOutcome };
  private running?: Promise<HealthOutcome>;

  constructor(
    private readonly health: HealthCheckService,
    private readonly db: TypeOrmHealthIndicator,
    private readonly metrics: MetricsService,
  ) {}

  check(): Promise<HealthOutcome> {
    if (this.last && performance.now() - this.last.finishedAt < HEALTH_RESULT_TTL_MS) return Promise.resolve(this.last.outcome);
    this.running ??= this.run().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async run(): Promise<HealthOutcome> {
    let outcome: HealthOutcome;
    try {
      outcome = { up: true, result: await this.health.check([() => this.db.pingCheck('database', { timeout: 1_500 })]) };
    } catch (error) {
      // Terminus's answer when an indicator fails: the database does not answer.
      if (!(error instanceof ServiceUnavailableException)) throw error;
      outcome = { up: false };
    }
    this.metrics.healthChecks.inc({ outcome: outcome.up ? 'up' : 'down' });
    this.last = { finishedAt: performance.now(), outcome };
    return outcome;
  }
}
