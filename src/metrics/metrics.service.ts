import { Injectable } from '@nestjs/common';
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * A private prom-client registry (never the global one, so two apps in one
 * process, as in tests, don't collide). Other modules register their own
 * metrics on `registry`.
 */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();
  readonly httpDuration: Histogram<'method' | 'route' | 'status'>;
  /** Database checks GET /health actually ran (the answers it served from its last result are not counted). */
  readonly healthChecks: Counter<'outcome'>;

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    this.httpDuration = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request duration by method, route and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [this.registry],
    });
    this.healthChecks = new Counter({
      name: 'health_checks_total',
      help: 'Database checks run for GET /health, by outcome (up, down)',
      labelNames: ['outcome'],
      registers: [this.registry],
    });
  }
}
