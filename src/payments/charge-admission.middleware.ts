import { Inject, Injectable, NestMiddleware } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Gauge } from 'prom-client';
import type { Next } from '../common/http';
import { problems } from '../common/problem';
import type { AppConfig } from '../config/config';
import { APP_CONFIG } from '../config/config.module';
import { MetricsService } from '../metrics/metrics.service';

/**
 * Admission control for the routes that reach the card network (POST /payments,
 * POST /payments/{id}/refunds). At most PAYMENTS_CONCURRENCY of them are worked
 * on at once by this instance; the next ones wait their turn in arrival order
 * (their sockets idle, costing nothing), and past PAYMENTS_QUEUE_LIMIT waiting a
 * request is turned away at once with 503 + Retry-After, before any claim.
 *
 * Why: with the card network's latency off the database (the phases), nothing
 * else bounds how much work a burst puts on the event loop. Unbounded, a burst
 * saturates the process and everything it serves waits behind it, health checks
 * included (an orchestrator would restart a healthy instance). Bounded, the
 * instance keeps headroom and the excess waits outside, in order.
 */
@Injectable()
export class ChargeAdmissionMiddleware implements NestMiddleware {
  private readonly limit: number;
  private readonly queueLimit: number;
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly gauge: Gauge<'state'>;

  constructor(@Inject(APP_CONFIG) config: AppConfig, metrics: MetricsService) {
    this.limit = config.payments.concurrency;
    this.queueLimit = config.payments.queueLimit;
    this.gauge = new Gauge({
      name: 'payments_admission',
      help: 'Card network routes being worked on (in_flight) and waiting their turn (queued), this instance',
      labelNames: ['state'],
      registers: [metrics.registry],
      collect: () => {
        this.gauge.set({ state: 'in_flight' }, this.inFlight);
        this.gauge.set({ state: 'queued' }, this.waiting.length);
      },
    });
  }

  use(req: IncomingMessage, res: ServerResponse, next: Next): void {
    if (this.limit === 0 || req.method !== 'POST') return next();
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const following = this.waiting.shift();
      if (following) following();
      else this.inFlight--;
    };
    const admit = () => {
      res.once('finish', release);
      res.once('close', release);
      next();
    };
    if (this.inFlight < this.limit) {
      this.inFlight++;
      admit();
    } else if (this.waiting.length < this.queueLimit) {
      // The slot is handed over as is: inFlight stays counted for the next one.
      this.waiting.push(admit);
    } else {
      throw problems.serviceUnavailable('This instance has too many payments in progress. Retry later with the same Idempotency-Key.');
    }
  }
}
