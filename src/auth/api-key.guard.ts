import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { httpRequestOf } from '../http/http-request';
import { problems } from '../http/problem';
import { isPublicRoute } from '../http/route-access';
import { authenticateRequest } from './authenticate-on-request';
import { ClientsService } from './clients.service';
import { RequestWithClient } from './current-client.decorator';
import { FailedAuthLimiter } from './failed-auth.limiter';

/**
 * Global guard: every route (and every GraphQL operation) needs `Authorization: Bearer <key>` unless it is
 * declared without one (Public, MetricsTokenRoute, SignedRoute). The
 * authentication hook (authenticateOnRequest) has already checked the key of
 * every such request before its body was read, so the client is found on the
 * request; the guard checks it again only where that hook did not run.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly clients: ClientsService,
    private readonly failedAuth: FailedAuthLimiter,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (isPublicRoute(this.reflector, context)) return true;
    const req = httpRequestOf<RequestWithClient>(context);
    if (!req) throw new Error('ApiKeyGuard guards HTTP routes and GraphQL operations only');
    const outcome = await authenticateRequest(req, this.clients, this.failedAuth);
    if (outcome === undefined) throw problems.unauthorized();
    if ('blockedFor' in outcome) throw this.failedAuth.refusal(outcome.blockedFor);
    return true;
  }
}
