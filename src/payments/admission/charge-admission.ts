import { Inject, Injectable } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import type { FastifyReply, preHandlerHookHandler } from 'fastify';
import { Gauge } from 'prom-client';
import { sendProblem } from '../../http/http';
import { UNAVAILABLE_RETRY_AFTER_SECONDS, problems } from '../../http/problem';
import type { AppConfig } from '../../config/config';
import { APP_CONFIG } from '../../config/config.module';
import { MetricsService } from '../../metrics/metrics.service';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route reaches the card network: it takes its turn in ChargeAdmission. */
    chargeAdmission?: boolean;
  }
}

/**
 * Marks a route as reaching the card network: its API key is checked on request
 * (auth's Authentication, as for every route that needs one), then, once its
 * body has arrived, it takes its turn in ChargeAdmission.
 */
export const ChargeRoute = () => RouteConfig({ chargeAdmission: true });

/** A request's hold on ChargeTurns: a slot, or a place in the queue until it gets one. */
export interface Turn {
  /** The request got a slot at once; otherwise `start` is called when it gets one, or `pushedOut` when it loses its place. */
  readonly now: boolean;
  /** Gives back the slot or the queue place, however the request ended; a second call does nothing. */
  end(): void;
}

/** Why a request got neither a slot nor a queue place: the queue is full, or its client holds its share of it. */
export type Refusal = 'queue_full' | 'over_share';

interface Waiter {
  state: 'waiting' | 'working' | 'done';
  start(): void;
  pushedOut(): void;
}

interface ClientTurns {
  working: number;
  /** Its requests waiting, in arrival order. */
  waiting: Waiter[];
  /** When it last got a slot (ChargeTurns' count of slots given), -1 for never. */
  lastStart: number;
}

/**
 * Who gets a slot, who waits and who is refused: at most `limit` requests at
 * work, `queueLimit` waiting. Work-conserving, and fair among the clients that
 * wait, whatever order their requests arrive in:
 * - a slot never stays free while a request waits: a client alone takes every
 *   free slot, however many it already holds;
 * - a freed slot goes to the waiting client with the fewest at work (ties: the
 *   one that got a slot least recently), so a newcomer takes the next freed
 *   slots, ahead of the queue of a client that holds them all, until it holds
 *   as many; clients that keep waiting end with an equal share each;
 * - a client may queue while it holds less than its share of the queue (the
 *   limit / the clients waiting, itself included; at least 1): alone, the whole
 *   queue. When the queue is full, a client under its share takes the place of
 *   the newest waiter of the longest queue if that one is past its share.
 * Every request the queue holds is one no slot could take: each change that can
 * free a slot for a waiter (a slot given back) hands out the free slots.
 */
export class ChargeTurns {
  private working = 0;
  private queued = 0;
  private starts = 0;
  private waitingClients = 0;
  /** The clients with requests at work or waiting (an idle client has no entry). */
  private readonly clients = new Map<string, ClientTurns>();

  constructor(
    private readonly limit: number,
    private readonly queueLimit: number,
  ) {}

  get inFlight(): number {
    return this.working;
  }

  get waiting(): number {
    return this.queued;
  }

  request(clientId: string, start: () => void, pushedOut: () => void): Turn | Refusal {
    const client = this.clients.get(clientId) ?? { working: 0, waiting: [], lastStart: -1 };
    const waiter: Waiter = { state: 'waiting', start, pushedOut };
    const turn = (now: boolean): Turn => ({ now, end: () => this.end(clientId, waiter) });
    // A free slot means nobody waits (handOutSlots leaves none free while anyone does): take it.
    if (this.working < this.limit) {
      this.clients.set(clientId, client);
      this.take(client, waiter);
      return turn(true);
    }
    const mine = client.waiting.length;
    const share = Math.max(1, Math.floor(this.queueLimit / (this.waitingClients + (mine === 0 ? 1 : 0))));
    if (this.queued < this.queueLimit) {
      if (mine >= share) return 'over_share';
    } else {
      const longest = mine < share ? this.longestQueue() : undefined;
      if (longest === undefined || longest[1].waiting.length <= share) return 'queue_full';
      const [outClientId, outClient] = longest;
      const out = outClient.waiting[outClient.waiting.length - 1];
      this.leaveQueue(outClientId, outClient, out);
      out.state = 'done';
      out.pushedOut();
    }
    this.clients.set(clientId, client);
    if (mine === 0) this.waitingClients++;
    client.waiting.push(waiter);
    this.queued++;
    return turn(false);
  }

  private end(clientId: string, waiter: Waiter): void {
    const client = this.clients.get(clientId);
    if (client === undefined || waiter.state === 'done') return;
    const wasWorking = waiter.state === 'working';
    waiter.state = 'done';
    if (!wasWorking) return this.leaveQueue(clientId, client, waiter);
    this.working--;
    client.working--;
    this.forgetIfIdle(clientId, client);
    this.handOutSlots();
  }

  private take(client: ClientTurns, waiter: Waiter): void {
    waiter.state = 'working';
    this.working++;
    client.working++;
    client.lastStart = this.starts++;
  }

  private leaveQueue(clientId: string, client: ClientTurns, waiter: Waiter): void {
    client.waiting.splice(client.waiting.indexOf(waiter), 1);
    this.queued--;
    if (client.waiting.length === 0) this.waitingClients--;
    this.forgetIfIdle(clientId, client);
  }

  private forgetIfIdle(clientId: string, client: ClientTurns): void {
    if (client.working === 0 && client.waiting.length === 0) this.clients.delete(clientId);
  }

  /** While a slot is free, gives it to the first waiter of the client with the fewest at work (ties: the least recently served). */
  private handOutSlots(): void {
    while (this.working < this.limit && this.queued > 0) {
      let next: [string, ClientTurns] | undefined;
      for (const entry of this.clients) {
        const client = entry[1];
        if (client.waiting.length === 0) continue;
        if (next === undefined || client.working < next[1].working || (client.working === next[1].working && client.lastStart < next[1].lastStart)) next = entry;
      }
      if (next === undefined) return;
      const [clientId, client] = next;
      const waiter = client.waiting[0];
      this.take(client, waiter);
      this.leaveQueue(clientId, client, waiter);
      waiter.start();
    }
  }

  private longestQueue(): [string, ClientTurns] | undefined {
    let longest: [string, ClientTurns] | undefined;
    for (const entry of this.clients) if (entry[1].waiting.length > (longest?.[1].waiting.length ?? 0)) longest = entry;
    return longest;
  }
}

/**
 * Admission control for the routes that reach the card network (those marked
 * `@ChargeRoute()`: POST /payments, POST /payments/{id}/refunds). At most
 * PAYMENTS_CONCURRENCY of them are worked on at once by this instance: all of
 * them one client's while no other client waits, shared among the clients that
 * wait as slots free (ChargeTurns); up to 1000 more (config.payments) wait
 * their turn (their sockets idle, their bodies parsed: HTTP_BODY_LIMIT each at
 * most).
 * Refused before any claim, with Retry-After: the queue full, 503; a client
 * holding its share of the queue, 429 (as is its newest waiter, pushed out by a
 * client under its share when the queue is full).
 *
 * Why: with the card network's latency off the database (the phases), nothing
 * else bounds how much work a burst puts on the event loop. Unbounded, a burst
 * saturates the process and everything it serves waits behind it, health checks
 * included (an orchestrator would restart a healthy instance). Bounded, the
 * instance keeps headroom and the excess waits outside. Idle slots are capacity
 * paid for, so a client alone may use them all; shared per client as they free,
 * neither one client's slow or hanging payments nor a few clients' floods of
 * them keep another client's first payment waiting behind their queues: it
 * takes the next slot that frees.
 *
 * A Fastify preHandler hook (`hook()`): the turn is taken once the body has
 * arrived and been parsed, by a client authenticated on request
 * (auth's Authentication, before the body). A request whose body is slow or
 * never comes holds a socket, never a slot or a queue place (Node's
 * requestTimeout answers it 408); a request turned away has cost its body read,
 * but no claim and no query. A slot or a queue place is given back when the
 * response finishes or its connection closes (the client gone, or an error
 * answered).
 */
@Injectable()
export class ChargeAdmission {
  /** None when PAYMENTS_CONCURRENCY is 0 (no limit). */
  private readonly turns?: ChargeTurns;
  private readonly gauge: Gauge<'state'>;

  constructor(@Inject(APP_CONFIG) config: AppConfig, metrics: MetricsService) {
    const { concurrency, queueLimit } = config.payments;
    if (concurrency > 0) this.turns = new ChargeTurns(concurrency, queueLimit);
    this.gauge = new Gauge({
      name: 'payments_admission',
      help: 'Card network routes being worked on (in_flight) and waiting their turn (queued), this instance',
      labelNames: ['state'],
      registers: [metrics.registry],
      collect: () => {
        this.gauge.set({ state: 'in_flight' }, this.turns?.inFlight ?? 0);
        this.gauge.set({ state: 'queued' }, this.turns?.waiting ?? 0);
      },
    });
  }

  /** The preHandler hook that makes a charge route take its turn (configureApp installs it). */
  hook(): preHandlerHookHandler {
    return (request, reply, done) => {
      if (this.turns === undefined || request.routeOptions.config?.chargeAdmission !== true) return done();
      const clientId = request.client?.id;
      // Fails closed: a slot is never taken for a request whose client is not known.
      if (clientId === undefined) return done(new Error('ChargeAdmission: the charge route was not authenticated on request (Authentication must be installed first)'));
      // Gone while its body was read: its connection's close has passed, so nothing would give back what it took.
      if (request.raw.socket.destroyed) return;

      const turn = this.turns.request(clientId, () => done(), () => refuseOverShare(reply));
      if (turn === 'queue_full') {
        return sendProblem(reply, problems.serviceUnavailable('This instance has too many payments in progress. Retry later with the same Idempotency-Key.'));
      }
      if (turn === 'over_share') return refuseOverShare(reply);
      reply.raw.once('finish', turn.end);
      reply.raw.once('close', turn.end);
      if (turn.now) done();
    };
  }
}

function refuseOverShare(reply: FastifyReply): void {
  sendProblem(reply, problems.rateLimited(UNAVAILABLE_RETRY_AFTER_SECONDS, 'This client has too many payments in progress. Retry later with the same Idempotency-Key.'));
}
