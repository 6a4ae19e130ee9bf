import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { sendProblem } from '../http/http';
import { problems } from '../http/problem';
import { isCorsPreflight, routeAccess } from '../http/route-access';
import type { AppConfig } from '../config/config';
import { bearerToken } from './api-key';
import { AuthenticatedClient } from './authenticated-client';
import { ClientsService } from './clients.service';
import { RequestWithClient } from './current-client.decorator';
import { Blocked, FailedAuthLimiter, closeIfBodyUnread, remoteAddress } from './failed-auth.limiter';
import { isMetricsTokenValid } from './metrics-token.access';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The route relies on its client being known before its body is read
     * (ChargeAdmission's turn needs it). Every route that needs an API key is
     * authenticated then; this says the route depends on it.
     */
    authenticateOnRequest?: boolean;
  }
  interface FastifyRequest {
    /** The authenticated client, once the API key has been checked (authenticateOnRequest, or ApiKeyGuard). */
    client?: AuthenticatedClient;
  }
}

/** The route config of a route that relies on being authenticated before its body is read (ChargeRoute adds it with its own). */
export const AUTHENTICATE_ON_REQUEST = { authenticateOnRequest: true } as const;

/**
 * The request's client from `Authorization: Bearer <key>`, kept on the request
 * so the check runs once per request whoever asks first; else why not:
 *
 * - a key this instance holds in memory passes at once, whatever the address;
 * - from an address over its failed-auth budget, anything else is Blocked,
 *   with no lookup: a made-up key costs no query;
 * - otherwise the failure is counted against the address (undefined), after
 *   one lookup of the key in the database if it has one (ClientsService.lookUp,
 *   in the address's turn: its lookups stop at its budget however many
 *   requests it sends at once).
 */
export async function authenticateRequest(
  req: RequestWithClient,
  clients: ClientsService,
  failedAuth: FailedAuthLimiter,
): Promise<AuthenticatedClient | Blocked | undefined> {
  if (req.client) return req.client;
  const key = bearerToken(req.headers.authorization);
  const held = key === undefined ? undefined : clients.held(key);
  if (held) return (req.client = held);
  const address = remoteAddress(req);
  const blockedFor = failedAuth.blockedFor(address);
  if (blockedFor !== undefined) return { blockedFor };
  if (key === undefined) {
    failedAuth.recordFailure(address);
    return undefined;
  }
  const found = await failedAuth.inTurn(address, async () => {
    const client = await clients.lookUp(key);
    if (!client) failedAuth.recordFailure(address);
    return client;
  });
  if (found !== undefined && 'id' in found) req.client = found;
  return found;
}

/**
 * The Fastify onRequest hook that authenticates every request before its body
 * is read, by the access of its route (RouteAccess):
 *
 * - `public` and `signed` routes, and CORS preflights, pass untouched: the
 *   failed-auth limit never blocks nor counts them (a signed route has a
 *   budget of its own);
 * - a `metrics-token` route passes with the metrics token; without it, the
 *   address is refused 429 when over its budget, else the failure is counted
 *   and answered (401, or 404 where /metrics is not served on this port);
 * - every other route, and a path no route matches, needs an API key
 *   (authenticateRequest): without a valid one the answer is 429 from an
 *   address over its budget, else 401, counted. So every 4xx a request
 *   without a valid key can get (a malformed, oversized or non-JSON body, an
 *   unknown path) is this 401 or 429, before the body is read; when one was
 *   announced the connection is closed with the answer (see closeIfBodyUnread).
 *
 * What comes after this hook (the 415 check, ChargeAdmission's slots, the body
 * parser, the guards) only ever sees requests with a valid credential.
 */
export function authenticateOnRequest(clients: ClientsService, failedAuth: FailedAuthLimiter, config: AppConfig): onRequestHookHandler {
  // The token of /metrics on this port; undefined where it is not served here (MetricsServer's port, or nowhere).
  const metricsToken = config.metrics.port === undefined ? config.metrics.token : undefined;
  return (request, reply, done) => {
    const access = routeAccess(request);
    if (access === 'public' || access === 'signed' || isCorsPreflight(request)) return done();
    if (access === 'metrics-token') {
      if (metricsToken !== undefined && isMetricsTokenValid(request.headers.authorization, metricsToken)) return done();
      return refuseMetrics(request, reply, failedAuth, metricsToken !== undefined);
    }
    authenticateRequest(request, clients, failedAuth).then(
      (outcome) => {
        if (outcome !== undefined && 'id' in outcome) return done();
        if (outcome !== undefined) return failedAuth.refuse(request, reply, outcome.blockedFor);
        closeIfBodyUnread(request, reply);
        sendProblem(reply, problems.unauthorized());
      },
      (error: Error) => done(error),
    );
  };
}

function refuseMetrics(request: FastifyRequest, reply: FastifyReply, failedAuth: FailedAuthLimiter, servedHere: boolean): void {
  const address = remoteAddress(request);
  const blockedFor = failedAuth.blockedFor(address);
  if (blockedFor !== undefined) return failedAuth.refuse(request, reply, blockedFor);
  failedAuth.recordFailure(address);
  sendProblem(reply, servedHere ? problems.unauthorized('Send Authorization: Bearer <METRICS_TOKEN>.') : problems.notFound(`Cannot ${request.method} /metrics`));
}
