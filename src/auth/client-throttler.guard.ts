import { ExecutionContext, Injectable } from '@nestjs/common';
import { ThrottlerGuard } from '@nestjs/throttler';
import type { ThrottlerLimitDetail } from '@nestjs/throttler';
import { httpReplyOf, httpRequestOf } from '../http/http-request';
import { problems } from '../http/problem';
import type { FastifyRequest } from 'fastify';
import { routeAccess } from '../http/route-access';
import { RequestWithClient } from './current-client.decorator';

/**
 * RATE_LIMIT_PER_CLIENT requests a second per API client, across all routes:
 * @nestjs/throttler's guard and storage, changed only through the guard's
 * documented hooks.
 *
 * - `shouldSkip`: routes reached without an API key (health, metrics, the
 *   card network's webhooks: a declared RouteAccess) are not counted.
 * - `getTracker`: the client Authentication set before the body was read, not
 *   the address. A route that needs a key reached without a client (the
 *   authentication hooks not installed) is a 500, never served.
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
    const request = httpRequestOf<FastifyRequest>(context);
    return Promise.resolve(request !== undefined && routeAccess(request) !== undefined);
  }

  protected override getTracker(req: Record<string, unknown>): Promise<string> {
    const client = (req as Partial<RequestWithClient>).client;
    if (!client) return Promise.reject(new Error('ClientThrottlerGuard ran on a route without a client: Authentication must be installed (configureApp)'));
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
