import { ExecutionContext, Injectable } from '@nestjs/common';
import { ThrottlerGuard } from '@nestjs/throttler';
import type { ThrottlerLimitDetail } from '@nestjs/throttler';
import { problems } from '../common/problem';
import { RequestWithClient } from './current-client.decorator';
import { IS_PUBLIC } from './public.decorator';

/**
 * RATE_LIMIT_PER_CLIENT requests a second per API client, across all routes,
 * counted in this instance's memory. Runs after ApiKeyGuard (registered after
 * it), so it knows the client; public routes (health, docs, metrics) are not
 * counted. Over the limit: 429 rate_limited with Retry-After.
 */
@Injectable()
export class ClientThrottlerGuard extends ThrottlerGuard {
  /** Public routes have no client (and Node's `req.client` is then the socket: test the route, not the request). */
  protected override shouldSkip(context: ExecutionContext): Promise<boolean> {
    return Promise.resolve(this.reflector.getAllAndOverride<boolean>(IS_PUBLIC, [context.getHandler(), context.getClass()]) === true);
  }

  protected override getTracker(req: Record<string, unknown>): Promise<string> {
    return Promise.resolve((req as Pick<RequestWithClient, 'client'>).client!.id);
  }

  /** One budget per client for every route (the default keys by controller and handler too). */
  protected override generateKey(_context: ExecutionContext, tracker: string, name: string): string {
    return `${name}:${tracker}`;
  }

  protected override throwThrottlingException(_context: ExecutionContext, detail: ThrottlerLimitDetail): Promise<void> {
    throw problems.rateLimited(detail.timeToBlockExpire);
  }
}
