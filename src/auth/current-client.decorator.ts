import { ExecutionContext, createParamDecorator } from '@nestjs/common';
import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { httpRequestOf } from '../http/http-request';
import { AuthenticatedClient } from './authenticated-client';

/** A route's request on either platform (a Fastify request, an Express one), with the client Authentication set. */
export interface RequestWithClient {
  headers: IncomingHttpHeaders;
  ip?: string;
  socket: Socket;
  client?: AuthenticatedClient;
}

/** The authenticated client of the request, or of the HTTP request carrying a GraphQL operation (set by Authentication). */
export const CurrentClient = createParamDecorator((_data: unknown, ctx: ExecutionContext): AuthenticatedClient => {
  const client = httpRequestOf<RequestWithClient>(ctx)?.client;
  if (!client) throw new Error('CurrentClient used on a route reached without an API key');
  return client;
});
