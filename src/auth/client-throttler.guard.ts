import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { InjectThrottlerOptions, InjectThrottlerStorage } from '@nestjs/throttler';
import type { ThrottlerModuleOptions, ThrottlerStorage } from '@nestjs/throttler';
import type { ResponseHeaders } from '../common/http';
import { problems } from '../common/problem';
import { RequestWithClient } from './current-client.decorator';
import { isPublicRoute } from './public.decorator';

/** A throttler of ThrottlerModule's options, its values read once. */
interface Throttler {
  name: string;
  limit: number;
  ttl: number;
  blockDuration: number;
  /** Of its headers: `-name`, none for `default` (as @nestjs/throttler names them). */
  suffix: string;
}

/**
 * RATE_LIMIT_PER_CLIENT requests a second per API client, across all routes,
 * counted in ThrottlerModule's storage (this instance's memory by default). Runs
 * after ApiKeyGuard (registered after it), so it knows the client; public routes
 * (health, docs, metrics) are not counted. Over the limit: 429 rate_limited with
 * Retry-After.
 *
 * @nestjs/throttler's module (options and storage, so a shared storage can be
 * plugged in) with a guard of our own: the library's guard reads five metadata
 * keys and awaits five promises per throttler on every request, for per-route
 * overrides (@Throttle, @SkipThrottle) this app does not use. This one reads the
 * options once and makes one storage call per throttler, and gives the same
 * answers and headers (X-RateLimit-Limit-client, -Remaining-client, -Reset-client;
 * Retry-After-client when refused).
 */
@Injectable()
export class ClientThrottlerGuard implements CanActivate {
  private readonly throttlers: Throttler[];

  constructor(
    @InjectThrottlerOptions() options: ThrottlerModuleOptions,
    @InjectThrottlerStorage() private readonly storage: ThrottlerStorage,
    private readonly reflector: Reflector,
  ) {
    this.throttlers = (Array.isArray(options) ? options : options.throttlers).map((t) => {
      const { limit, ttl, blockDuration = ttl } = t;
      if (typeof limit !== 'number' || typeof ttl !== 'number' || typeof blockDuration !== 'number') {
        throw new Error('ClientThrottlerGuard: a throttler\'s limit, ttl and blockDuration must be numbers');
      }
      const name = t.name ?? 'default';
      return { name, limit, ttl, blockDuration, suffix: name === 'default' ? '' : `-${name}` };
    });
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (isPublicRoute(this.reflector, context)) return true;
    const http = context.switchToHttp();
    const clientId = http.getRequest<RequestWithClient>().client!.id;
    const res = http.getResponse<ResponseHeaders>();
    for (const t of this.throttlers) {
      // One budget per client for every route (the library's default key is per controller and handler too).
      const hit = await this.storage.increment(`${t.name}:${clientId}`, t.ttl, t.limit, t.blockDuration, t.name);
      if (hit.isBlocked) {
        res.header(`Retry-After${t.suffix}`, String(hit.timeToBlockExpire));
        throw problems.rateLimited(hit.timeToBlockExpire);
      }
      res.header(`X-RateLimit-Limit${t.suffix}`, String(t.limit));
      res.header(`X-RateLimit-Remaining${t.suffix}`, String(Math.max(0, t.limit - hit.totalHits)));
      res.header(`X-RateLimit-Reset${t.suffix}`, String(hit.timeToExpire));
    }
    return true;
  }
}
