import type { onRequestHookHandler } from 'fastify';
import { sendProblem } from '../common/http';
import { problems } from '../common/problem';
import { bearerToken } from './api-key';
import { AuthenticatedClient } from './authenticated-client';
import { ClientsService } from './clients.service';
import { RequestWithClient } from './current-client.decorator';
import { FailedAuthLimiter, remoteAddress } from './failed-auth.limiter';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The API key is checked in an onRequest hook, before the body is read (see authenticateOnRequest). */
    authenticateOnRequest?: boolean;
  }
  interface FastifyRequest {
    /** The authenticated client, once the API key has been checked (authenticateOnRequest or ApiKeyGuard). */
    client?: AuthenticatedClient;
  }
}

/** The route config of a route authenticated before its body is read (ChargeRoute adds it with its own). */
export const AUTHENTICATE_ON_REQUEST = { authenticateOnRequest: true } as const;

/**
 * The request's client from `Authorization: Bearer <key>` (ClientsService's
 * cached lookup), kept on the request so the check runs once per request
 * whoever asks first; or undefined, the failure counted against the address
 * (FailedAuthLimiter).
 */
export async function authenticateRequest(
  req: RequestWithClient,
  clients: ClientsService,
  failedAuth: FailedAuthLimiter,
): Promise<AuthenticatedClient | undefined> {
  if (req.client) return req.client;
  const key = bearerToken(req.headers.authorization);
  const client = key ? await clients.authenticate(key) : undefined;
  if (!client) {
    failedAuth.recordFailure(remoteAddress(req));
    return undefined;
  }
  req.client = client;
  return client;
}

/**
 * The Fastify onRequest hook that authenticates the routes marked
 * `authenticateOnRequest` before anything is done for them: what comes after it
 * (ChargeAdmission's slots) is never taken or waited for by a request without a
 * valid key. Such a request gets the guard's 401 before its body is read, and
 * the connection is closed with it (the unread body is not waited for).
 * ApiKeyGuard finds the client on the request and does not look it up again.
 */
export function authenticateOnRequest(clients: ClientsService, failedAuth: FailedAuthLimiter): onRequestHookHandler {
  return (request, reply, done) => {
    if (request.routeOptions.config?.authenticateOnRequest !== true) return done();
    authenticateRequest(request, clients, failedAuth).then(
      (client) => {
        if (client) return done();
        reply.header('Connection', 'close');
        sendProblem(reply, problems.unauthorized());
      },
      (error: Error) => done(error),
    );
  };
}
