import { ExecutionContext, Injectable } from '@nestjs/common';
import { ThrottlerGuard } from '@nestjs/throttler';
import type { ThrottlerLimitDetail } from '@nestjs/throttler';
import { httpReplyOf, httpRequestOf } from '../http/http-request';
import { problems } from '../http/problem';
import { isPublicRoute } from '../http/route-access';
import { RequestWithClient } from './current-client.decorator';

/**
 * RATE_LIMIT_PER_CLIENT requests a second per API client, across all routes:
 * @nestjs/throttler's guard and storage, changed only through the guard's
 * documented hooks.
 *
 * - `shouldSkip`: public routes (health, docs, metrics) are not counted.
 * - `getTracker`: the client ApiKeyGuard set, not the address (this guard is
 *   registered after ApiKeyGuard, so every route it counts has one).
 * - `generateKey`: one budget per client for every route (the library's key is
 *   per controller and handler too).
 * - `throwThrottlingException`: 429 problem+json `rate_limited` with Retry-After.
 * - `getRequestResponse`: the Fastify request and reply of a route or of a
 *   GraphQL operation, so /graphql shares the client's budget.
 *
 * The headers are the library's, named after the `client` throttler:
 * X-RateLimit-Limit-client, -Remaining-client, -Reset-client, and
 * Retry-After-client when refused.
 */
@Injectable()
export class ClientThrottlerGuard extends ThrottlerGuard {
  protected override shouldSkip(context: ExecutionContext): Promise<boolean> {
    return Promise.resolve(isPublicRoute(this.reflector, context));
  }

  protected override getTracker(req: Record<string, unknown>): Promise<string> {
    const client = (req as Partial<RequestWithClient>).client;
    if (!client) return Promise.reject(new Error('ClientThrottlerGuard ran on a route without a client: it must run after ApiKeyGuard'));
    return Promise.resolve(client.id);
  }

  protected override getRequestResponse(context: ExecutionContext): { req: Record<string, unknown>; res: Record<string, unknown> } {
    const req = httpRequestOf<Record<string, unknown>>(context);
    const res = httpReplyOf<Record<string, unknown>>(context);
    if (!req || !res) throw new Error('ClientThrottlerGuard guards HTTP routes and GraphQL operations only');
    return { req, res };
  }

  protected override generateKey(_context: ExecutionContext, tracker: string, throttlerName: string): string {
    return `${throttlerName}:${tracker}`;
  }

  protected override throwThrottlingException(_context: ExecutionContext, detail: ThrottlerLimitDetail): Promise<void> {
    throw problems.rateLimited(detail.timeToBlockExpire);
  }
}
