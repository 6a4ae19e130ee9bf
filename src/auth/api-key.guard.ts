import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { problems } from '../common/problem';
import { bearerToken } from './api-key';
import { ClientsService } from './clients.service';
import { RequestWithClient } from './current-client.decorator';
import { FailedAuthLimiter, remoteAddress } from './failed-auth.limiter';
import { isPublicRoute } from './public.decorator';

/** Global guard: every route needs `Authorization: Bearer <key>` unless @Public(). */
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
    const key = bearerToken(req.headers.authorization);
    const client = key ? await this.clients.authenticate(key) : undefined;
    if (!client) {
      await this.failedAuth.recordFailure(remoteAddress(req));
      throw problems.unauthorized();
    }
    req.client = client;
    return true;
  }
}
