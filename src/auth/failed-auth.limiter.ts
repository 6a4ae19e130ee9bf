import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Socket } from 'node:net';
import type { onRequestHookHandler } from 'fastify';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { sendProblem } from '../common/http';
import { problems } from '../common/problem';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { bearerToken } from './api-key';
import { ClientsService } from './clients.service';

/** Past this many blocked addresses, the expired ones are swept (at most once a second) when another is added. */
const MAX_TRACKED_BLOCKS = 10_000;

/**
 * Failed authentications per remote address (RATE_LIMIT_UNAUTHENTICATED a
 * minute, in this instance's memory). ApiKeyGuard counts each failure; the
 * Fastify onRequest hook from `hook()`, which runs before the body is read,
 * refuses an address over its budget at once: no body read, no database query, no log line.
 * A key this instance has already seen authenticate passes anyway, so a flood
 * from behind the same NAT does not lock out a working client.
 */
@Injectable()
export class FailedAuthLimiter {
  private readonly logger = new Logger('Auth');
  private readonly failures: RateLimiterMemory;
  /** One warning per address per minute, whatever the flood. */
  private readonly warnings = new RateLimiterMemory({ points: 1, duration: 60 });
  /**
   * The addresses over their budget, with when their window ends (ms since the
   * epoch). Kept beside the counter so that the check on every request is one
   * Map lookup, not a promise.
   */
  private readonly blockedUntil = new Map<string, number>();
  private lastSweep = 0;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly clients: ClientsService,
  ) {
    this.failures = new RateLimiterMemory({ points: config.rateLimit.unauthenticatedPerMinute, duration: 60 });
  }

  /** Seconds until the address may try again, or undefined when it is within its budget. */
  blockedFor(address: string): number | undefined {
    const until = this.blockedUntil.get(address);
    if (until === undefined) return undefined;
    const ms = until - Date.now();
    if (ms > 0) return ms / 1000;
    this.blockedUntil.delete(address);
    return undefined;
  }

  /** Counts a failed authentication (a missing or unknown key) of the address. */
  async recordFailure(address: string): Promise<void> {
    let state: RateLimiterRes;
    try {
      state = await this.failures.consume(address);
    } catch (rejected) {
      if (!(rejected instanceof RateLimiterRes)) throw rejected;
      state = rejected;
    }
    if (state.consumedPoints >= this.failures.points) this.block(address, state.msBeforeNext);
    try {
      await this.warnings.consume(address);
      this.logger.warn({ address, failuresThisMinute: state.consumedPoints }, 'failed authentication (logged once a minute per address)');
    } catch (rejected) {
      if (!(rejected instanceof RateLimiterRes)) throw rejected;
    }
  }

  /** The Fastify onRequest hook that refuses an address over its budget (see the class comment). */
  hook(): onRequestHookHandler {
    return (request, reply, done) => {
      const seconds = this.blockedFor(remoteAddress(request));
      if (seconds === undefined) return done();
      const key = bearerToken(request.headers.authorization);
      if (key && this.clients.isKnownKey(key)) return done();
      sendProblem(reply, problems.rateLimited(seconds, 'Too many failed authentications from this address. Retry after Retry-After seconds.'));
    };
  }

  private block(address: string, ms: number): void {
    const now = Date.now();
    // At most one sweep a second: a flood from more addresses than that never makes each failure a scan.
    if (this.blockedUntil.size >= MAX_TRACKED_BLOCKS && now - this.lastSweep >= 1_000) {
      this.lastSweep = now;
      for (const [a, until] of this.blockedUntil) if (until <= now) this.blockedUntil.delete(a);
    }
    this.blockedUntil.set(address, now + ms);
  }
}

/**
 * The peer's address: the platform's `ip` (Fastify's; it would honour
 * `trustProxy`, which this app leaves off), else the socket's.
 */
export function remoteAddress(req: { ip?: string; socket: Socket }): string {
  return req.ip ?? req.socket.remoteAddress ?? 'unknown';
}
