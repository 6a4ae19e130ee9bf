import { Inject, Injectable } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import type { onRequestHookHandler } from 'fastify';
import { Gauge } from 'prom-client';
import { sendProblem } from '../common/http';
import { problems } from '../common/problem';
import type { AppConfig } from '../config/config';
import { APP_CONFIG } from '../config/config.module';
import { MetricsService } from '../metrics/metrics.service';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route reaches the card network: it takes its turn in ChargeAdmission. */
    chargeAdmission?: boolean;
  }
}

/** Marks a route as reaching the card network: it takes its turn in ChargeAdmission. */
export const ChargeRoute = () => RouteConfig({ chargeAdmission: true });

/**
 * Admission control for the routes that reach the card network (those marked
 * `@ChargeRoute()`: POST /payments, POST /payments/{id}/refunds). At most
 * PAYMENTS_CONCURRENCY of them are worked on at once by this instance; the next ones wait their turn in arrival order
 * (their sockets idle, costing nothing), and past PAYMENTS_QUEUE_LIMIT waiting a
 * request is turned away at once with 503 + Retry-After, before any claim.
 *
 * Why: with the card network's latency off the database (the phases), nothing
 * else bounds how much work a burst puts on the event loop. Unbounded, a burst
 * saturates the process and everything it serves waits behind it, health checks
 * included (an orchestrator would restart a healthy instance). Bounded, the
 * instance keeps headroom and the excess waits outside, in order.
 *
 * A Fastify onRequest hook (`hook()`): the turn is taken before the body is
 * read, and a request turned away has cost no body read, no claim and no query.
 */
@Injectable()
export class ChargeAdmission {
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

  /** The onRequest hook that makes a charge route take its turn (configureApp installs it). */
  hook(): onRequestHookHandler {
    return (request, reply, done) => {
      if (this.limit === 0 || request.routeOptions.config?.chargeAdmission !== true) return done();
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        const following = this.waiting.shift();
        if (following) following();
        else this.inFlight--;
      };
      const admit = () => {
        reply.raw.once('finish', release);
        reply.raw.once('close', release);
        done();
      };
      if (this.inFlight < this.limit) {
        this.inFlight++;
        admit();
      } else if (this.waiting.length < this.queueLimit) {
        // The slot is handed over as is: inFlight stays counted for the next one.
        this.waiting.push(admit);
      } else {
        sendProblem(reply, problems.serviceUnavailable('This instance has too many payments in progress. Retry later with the same Idempotency-Key.'));
      }
    };
  }
}
