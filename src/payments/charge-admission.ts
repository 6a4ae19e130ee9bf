import { Inject, Injectable } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import type { FastifyReply, preHandlerHookHandler } from 'fastify';
import { Gauge } from 'prom-client';
import { AUTHENTICATE_ON_REQUEST } from '../auth/authenticate-on-request';
import { sendProblem } from '../common/http';
import { ProblemException, UNAVAILABLE_RETRY_AFTER_SECONDS, problems } from '../common/problem';
import type { AppConfig } from '../config/config';
import { APP_CONFIG } from '../config/config.module';
import { MetricsService } from '../metrics/metrics.service';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route reaches the card network: it takes its turn in ChargeAdmission. */
    chargeAdmission?: boolean;
  }
}

/**
 * Marks a route as reaching the card network: its API key is checked on request
 * (authenticateOnRequest), then, once its body has arrived, it takes its turn in
 * ChargeAdmission.
 */
export const ChargeRoute = () => RouteConfig({ chargeAdmission: true, ...AUTHENTICATE_ON_REQUEST });

/** A charge request waiting its turn. */
interface Waiter {
  /** Arrival order: among the clients with room, the earliest waiter goes first. */
  seq: number;
  clientId: string;
  start(): void;
}

/**
 * Admission control for the routes that reach the card network (those marked
 * `@ChargeRoute()`: POST /payments, POST /payments/{id}/refunds). At most
 * PAYMENTS_CONCURRENCY of them are worked on at once by this instance, and at
 * most PAYMENTS_CONCURRENCY_PER_CLIENT of one client's. The next ones wait their
 * turn (their sockets idle, costing nothing): when a slot frees, it goes to the
 * earliest waiter of a client under its share, so a client past its share waits
 * behind its own requests only and never holds up another client's turn.
 * Refused at once, before any claim: past PAYMENTS_QUEUE_LIMIT waiting, 503 +
 * Retry-After; a client already holding its share of that queue (the queue
 * limit × its share of the slots), 429 + Retry-After.
 *
 * Why: with the card network's latency off the database (the phases), nothing
 * else bounds how much work a burst puts on the event loop. Unbounded, a burst
 * saturates the process and everything it serves waits behind it, health checks
 * included (an orchestrator would restart a healthy instance). Bounded, the
 * instance keeps headroom and the excess waits outside, in order; bounded per
 * client, one client's slow or hanging payments cannot take every slot.
 *
 * A Fastify preHandler hook (`hook()`): the turn is taken once the body has
 * arrived and been parsed, by a client authenticated on request
 * (authenticateOnRequest, before the body). A request whose body is slow or
 * never comes holds a socket, never a slot or a queue place (Node's
 * requestTimeout answers it 408); a request turned away has cost its body read,
 * but no claim and no query. A slot or a queue place is given back when the
 * response finishes or its connection closes (the client gone, or an error
 * answered).
 */
@Injectable()
export class ChargeAdmission {
  private readonly limit: number;
  private readonly queueLimit: number;
  private readonly perClient: number;
  private readonly perClientQueueLimit: number;
  private inFlight = 0;
  private readonly inFlightOf = new Map<string, number>();
  /** Each waiting client's requests in arrival order (a client without waiters has no entry). */
  private readonly queues = new Map<string, Waiter[]>();
  private queued = 0;
  private arrivals = 0;
  private readonly gauge: Gauge<'state'>;

  constructor(@Inject(APP_CONFIG) config: AppConfig, metrics: MetricsService) {
    this.limit = config.payments.concurrency;
    this.queueLimit = config.payments.queueLimit;
    this.perClient = Math.min(config.payments.perClient, this.limit);
    this.perClientQueueLimit = this.limit === 0 ? 0 : Math.ceil((this.queueLimit * this.perClient) / this.limit);
    this.gauge = new Gauge({
      name: 'payments_admission',
      help: 'Card network routes being worked on (in_flight) and waiting their turn (queued), this instance',
      labelNames: ['state'],
      registers: [metrics.registry],
      collect: () => {
        this.gauge.set({ state: 'in_flight' }, this.inFlight);
        this.gauge.set({ state: 'queued' }, this.queued);
      },
    });
  }

  /** The preHandler hook that makes a charge route take its turn (configureApp installs it). */
  hook(): preHandlerHookHandler {
    return (request, reply, done) => {
      if (this.limit === 0 || request.routeOptions.config?.chargeAdmission !== true) return done();
      const clientId = request.client?.id;
      // Fails closed: a slot is never taken for a request whose client is not known.
      if (clientId === undefined) return done(new Error('ChargeAdmission: the charge route was not authenticated on request (authenticateOnRequest must run first)'));
      // Gone while its body was read: its connection's close has passed, so nothing would give back what it took.
      if (request.raw.socket.destroyed) return;

      let state: 'waiting' | 'working' | 'done' = 'waiting';
      const waiter: Waiter = {
        seq: this.arrivals++,
        clientId,
        start: () => {
          state = 'working';
          this.take(clientId);
          done();
        },
      };
      const end = () => {
        if (state === 'working') this.release(clientId);
        else if (state === 'waiting') this.dequeue(waiter);
        state = 'done';
      };
      reply.raw.once('finish', end);
      reply.raw.once('close', end);

      // Every change runs pump(): whoever still waits while a slot is free is a client past its share.
      if (this.hasRoom(clientId)) return waiter.start();
      const queue = this.queues.get(clientId);
      if (this.queued >= this.queueLimit) {
        state = 'done';
        return refuse(reply, problems.serviceUnavailable('This instance has too many payments in progress. Retry later with the same Idempotency-Key.'));
      }
      if ((queue?.length ?? 0) >= this.perClientQueueLimit) {
        state = 'done';
        return refuse(reply, problems.rateLimited(UNAVAILABLE_RETRY_AFTER_SECONDS, 'This client has too many payments in progress. Retry later with the same Idempotency-Key.'));
      }
      if (queue) queue.push(waiter);
      else this.queues.set(clientId, [waiter]);
      this.queued++;
    };
  }

  private hasRoom(clientId: string): boolean {
    return this.inFlight < this.limit && (this.inFlightOf.get(clientId) ?? 0) < this.perClient;
  }

  private take(clientId: string): void {
    this.inFlight++;
    this.inFlightOf.set(clientId, (this.inFlightOf.get(clientId) ?? 0) + 1);
  }

  private release(clientId: string): void {
    this.inFlight--;
    const held = (this.inFlightOf.get(clientId) ?? 1) - 1;
    if (held === 0) this.inFlightOf.delete(clientId);
    else this.inFlightOf.set(clientId, held);
    this.pump();
  }

  private dequeue(waiter: Waiter): void {
    const queue = this.queues.get(waiter.clientId);
    const at = queue?.indexOf(waiter) ?? -1;
    if (!queue || at === -1) return;
    queue.splice(at, 1);
    if (queue.length === 0) this.queues.delete(waiter.clientId);
    this.queued--;
  }

  /** Starts the earliest waiters of the clients under their share while slots are free. */
  private pump(): void {
    while (this.inFlight < this.limit && this.queued > 0) {
      let next: Waiter | undefined;
      for (const [clientId, queue] of this.queues) {
        if ((this.inFlightOf.get(clientId) ?? 0) >= this.perClient) continue;
        if (next === undefined || queue[0].seq < next.seq) next = queue[0];
      }
      if (next === undefined) return;
      this.dequeue(next);
      next.start();
    }
  }
}

function refuse(reply: FastifyReply, problem: ProblemException): void {
  sendProblem(reply, problem);
}
