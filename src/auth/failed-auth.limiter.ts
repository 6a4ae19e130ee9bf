import { Inject, Injectable, Logger, OnApplicationShutdown, Optional } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { addressKey } from '../addresses/client-address';
import { sendProblem } from '../http/http';
import { ProblemException, problems } from '../http/problem';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { AddressBudget } from './address-budget';

/**
 * At most this many addresses are counted below their budget (about 100 bytes
 * each); past it the least recently seen is forgotten. Blocked addresses are
 * kept apart and never forgotten to make room (see AddressBudget).
 */
export const MAX_TRACKED_ADDRESSES = 10_000;
/** Injection token of another cap than MAX_TRACKED_ADDRESSES (optional). */
export const FAILED_AUTH_MAX_ADDRESSES = Symbol('FAILED_AUTH_MAX_ADDRESSES');

/** What a request gets when its address is over its budget. */
export interface Blocked {
  blockedFor: number;
}

/**
 * Failed authentications (a missing or unknown API key, a wrong or missing
 * metrics token, any request to a route that needs a key made without a valid
 * one) per client address: 60 a minute (config.rateLimit), in this
 * instance's memory (AddressBudget: an IPv6 address counts by its /64). The
 * address is Fastify's `request.ip`: the peer's, or with HTTP_TRUST_PROXY the one a
 * trusted proxy forwarded.
 *
 * Authentication consults it before the body is read, for every request
 * without a valid credential; public routes (health, docs) and the card
 * network's webhooks (a budget of their own, WebhookSignatureLimiter) never
 * do. Why a budget per address, and why a valid credential passes whatever its
 * address: a flood of bad keys must cost at most a few queries, and must not
 * lock out the clients that share its address (a NAT, a load balancer).
 */
@Injectable()
export class FailedAuthLimiter extends AddressBudget implements OnApplicationShutdown {
  /** Per address: the tail of its lookups of keys this instance does not hold (see inTurn). */
  private readonly turns = new Map<string, Promise<unknown>>();

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    @Optional() @Inject(FAILED_AUTH_MAX_ADDRESSES) maxAddresses: number = MAX_TRACKED_ADDRESSES,
  ) {
    super({
      limit: config.rateLimit.unauthenticatedPerMinute,
      maxCounted: maxAddresses,
      failure: 'failed authentication',
      failures: 'failed authentications',
      logger: new Logger('Auth'),
    });
  }

  /**
   * A request from `address` without a valid credential: Blocked when the
   * address is over its budget already (nothing counted), else its failure is
   * counted (undefined).
   */
  fail(address: string): Blocked | undefined {
    const blockedFor = this.blockedFor(address);
    if (blockedFor !== undefined) return { blockedFor };
    this.recordFailure(address);
    return undefined;
  }

  /**
   * Runs `lookup` (a database lookup of a key) in the address's turn: one at a
   * time per address, each after the previous one's failure was counted, and
   * not at all once the address is blocked (then Blocked). However many
   * requests an address sends at once, its lookups stop at its budget.
   */
  inTurn<T>(address: string, lookup: () => Promise<T>): Promise<T | Blocked> {
    const key = addressKey(address);
    const run = async (): Promise<T | Blocked> => {
      const blockedFor = this.blockedFor(address);
      return blockedFor === undefined ? lookup() : { blockedFor };
    };
    const previous = this.turns.get(key);
    const mine = previous === undefined ? run() : previous.then(run);
    const tail = mine.catch(() => undefined);
    this.turns.set(key, tail);
    void tail.then(() => {
      if (this.turns.get(key) === tail) this.turns.delete(key);
    });
    return mine;
  }

  /** The 429 of a request refused because its address is blocked (counted as a refusal). */
  refusal(seconds: number): ProblemException {
    this.recordRefusal();
    return problems.rateLimited(seconds, 'Too many failed authentications from this address. Retry after Retry-After seconds.');
  }

  /** Answers a request refused before its body was read (see closeIfBodyUnread). */
  refuse(request: FastifyRequest, reply: FastifyReply, seconds: number): void {
    closeIfBodyUnread(request, reply);
    sendProblem(reply, this.refusal(seconds));
  }

  onApplicationShutdown(): void {
    this.stop();
  }
}

/**
 * Closes the connection after the answer when the request announced a body
 * that is not going to be read: otherwise Node reads and discards all of it
 * to keep the connection open, however large it is.
 */
export function closeIfBodyUnread(request: FastifyRequest, reply: FastifyReply): void {
  const { headers } = request;
  if (headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0) reply.header('Connection', 'close');
}

/**
 * The client's address of a request: Fastify's `request.ip`, which is the
 * peer's address, or with HTTP_TRUST_PROXY the address a trusted proxy forwarded.
 */
export function remoteAddress(req: { ip?: string }): string {
  return req.ip ?? 'unknown';
}
