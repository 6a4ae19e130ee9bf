import { Inject, Injectable, Logger } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { HttpRequest, Next, sendProblem } from '../common/http';
import { problems } from '../common/problem';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { bearerToken } from './api-key';
import { ClientsService } from './clients.service';

/**
 * Failed authentications per remote address (RATE_LIMIT_UNAUTHENTICATED a
 * minute, in this instance's memory). ApiKeyGuard counts each failure; the
 * middleware from `middleware()`, registered before the body parser, refuses an
 * address over its budget at once: no body read, no database query, no log line.
 * A key this instance has already seen authenticate passes anyway, so a flood
 * from behind the same NAT does not lock out a working client.
 */
@Injectable()
export class FailedAuthLimiter {
  private readonly logger = new Logger('Auth');
  private readonly failures: RateLimiterMemory;
  /** One warning per address per minute, whatever the flood. */
  private readonly warnings = new RateLimiterMemory({ points: 1, duration: 60 });

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly clients: ClientsService,
  ) {
    this.failures = new RateLimiterMemory({ points: config.rateLimit.unauthenticatedPerMinute, duration: 60 });
  }

  /** Seconds until the address may try again, or undefined when it is within its budget. */
  async blockedFor(address: string): Promise<number | undefined> {
    const state = await this.failures.get(address);
    return state && state.consumedPoints >= this.failures.points ? state.msBeforeNext / 1000 : undefined;
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
    try {
      await this.warnings.consume(address);
      this.logger.warn({ address, failuresThisMinute: state.consumedPoints }, 'failed authentication (logged once a minute per address)');
    } catch (rejected) {
      if (!(rejected instanceof RateLimiterRes)) throw rejected;
    }
  }

  /** The middleware that refuses an address over its budget (see the class comment). */
  middleware() {
    return (req: HttpRequest, res: ServerResponse, next: Next): void => {
      const address = remoteAddress(req);
      this.blockedFor(address).then((seconds) => {
        if (seconds === undefined) return next();
        const key = bearerToken(req.headers.authorization);
        if (key && this.clients.isKnownKey(key)) return next();
        sendProblem(res, problems.rateLimited(seconds, 'Too many failed authentications from this address. Retry after Retry-After seconds.'));
      }, next);
    };
  }
}

/**
 * The peer's address: the platform's `ip` (Fastify's, copied to the Node request
 * for middleware; it would honour `trustProxy`, which this app leaves off), else the socket's.
 */
export function remoteAddress(req: { ip?: string; socket: Socket }): string {
  return req.ip ?? req.socket.remoteAddress ?? 'unknown';
}
