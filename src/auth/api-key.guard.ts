import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { problems } from '../common/problem';
import { authenticateRequest } from './authenticate-on-request';
import { ClientsService } from './clients.service';
import { RequestWithClient } from './current-client.decorator';
import { FailedAuthLimiter } from './failed-auth.limiter';
import { isPublicRoute } from './public.decorator';

/**
 * Global guard: every route needs `Authorization: Bearer <key>` unless @Public().
 * A route authenticated on request (authenticateOnRequest: the charge routes)
 * arrives with its client already set, and is not looked up again.
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
    const req = context.switchToHttp().getRequest<RequestWithClient>();
    if (!(await authenticateRequest(req, this.clients, this.failedAuth))) throw problems.unauthorized();
    return true;
  }
}
