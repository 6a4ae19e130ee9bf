import { ExecutionContext, createParamDecorator } from '@nestjs/common';
import type { Request } from 'express';
import { AuthenticatedClient } from './authenticated-client';

export type RequestWithClient = Request & { client?: AuthenticatedClient };

/** The authenticated client of the request (set by ApiKeyGuard). */
export const CurrentClient = createParamDecorator((_data: unknown, ctx: ExecutionContext): AuthenticatedClient => {
  const client = ctx.switchToHttp().getRequest<RequestWithClient>().client;
  if (!client) throw new Error('CurrentClient used on a route without ApiKeyGuard');
  return client;
});
