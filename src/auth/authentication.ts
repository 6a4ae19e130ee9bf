import { Inject, Injectable } from '@nestjs/common';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { sendProblem } from '../http/http';
import { ProblemException, problems } from '../http/problem';
import { isCorsPreflight, routeAccess } from '../http/route-access';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { bearerToken } from './api-key';
import { AuthenticatedClient } from './authenticated-client';
import { ClientsService } from './clients.service';
import { Blocked, FailedAuthLimiter, closeIfBodyUnread, remoteAddress } from './failed-auth.limiter';
import { MetricsTokenAccess } from './metrics-token.access';
import { InvalidSignatureError, RequestSignature } from './request-signature';
import { WebhookSignatureLimiter } from './webhook-signature.limiter';

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated client, once its API key has been checked (Authentication). */
    client?: AuthenticatedClient;
    /** Set once the signature of a `signed` route's request has verified (Authentication). */
    signatureVerified?: true;
  }
}

/**
 * Who may call what: the one place a request's credential is checked, once,
 * by the access its route declares (RouteAccess, read from the request):
 *
 * - `public` routes, and CORS preflights, pass untouched: the failed-auth
 *   limit never blocks nor counts them;
 * - `metrics-token`: the metrics token (MetricsTokenAccess, the check
 *   MetricsServer makes on its own port too); without it, 429 from an address
 *   over its failed-auth budget, else the failure is counted and answered (401,
 *   or 404 where /metrics is not served on this port);
 * - `signed`: the signature over the body (RequestSignature), on a budget of
 *   invalid signatures of its own (WebhookSignatureLimiter), never the
 *   failed-auth one: the network's deliveries share the load balancer's
 *   address with everyone, so keyless floods must not stop them;
 * - every other route, and a path no route matches: an API key
 *   (authenticateRequest). Without a valid one the answer is 429 from an
 *   address over its budget, else 401, counted.
 *
 * Authenticate before the body is read: a request without a valid credential
 * must cost no body read, no parse, no charge slot and no query for a made-up
 * key from a blocked address. So every check that does not need the body runs
 * in the onRequest hook, and every 4xx a request without a valid key can get
 * (a malformed, oversized or non-JSON body, an unknown path) is this 401 or
 * 429; when a body was announced the connection is closed with the answer (see
 * closeIfBodyUnread). What comes after (the 415 check, ChargeAdmission's slots,
 * the body parser, the guards) only ever sees requests with a valid
 * credential, or a `signed` one whose signature is yet to verify.
 *
 * A signature is over the body, so it is verified in the preValidation hook,
 * once the body has arrived (held to the route's `maxBodyBytes`) and before
 * anything parses it; before the body, a blocked address is refused only when
 * its delivery does not even look signed, so that a real delivery from a
 * shared address is always read and verified.
 */
@Injectable()
export class Authentication {
  /** Whether /metrics is served on this port (METRICS_TOKEN set, METRICS_PORT not: else MetricsServer's port serves it, or nothing). */
  private readonly metricsServedHere: boolean;

  constructor(
    private readonly clients: ClientsService,
    private readonly failedAuth: FailedAuthLimiter,
    private readonly metrics: MetricsTokenAccess,
    private readonly signatures: WebhookSignatureLimiter,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.metricsServedHere = config.metrics.port === undefined && config.metrics.token !== undefined;
  }

  /** Adds the hooks (configureApp, before any hook that reads or waits for the body); `signature` verifies the `signed` routes. */
  install(fastify: FastifyInstance, signature: RequestSignature): void {
    fastify.addHook('onRequest', (request, reply, done) => {
      if (isCorsPreflight(request)) return done();
      const access = routeAccess(request);
      switch (access) {
        case 'public':
          return done();
        case 'metrics-token':
          return this.metricsToken(request, reply, done);
        case 'signed':
          return this.beforeSignedBody(request, reply, done, signature);
        case undefined:
          return this.apiKey(request, reply, done);
      }
    });
    fastify.addHook('preValidation', (request, _reply, done) => {
      if (routeAccess(request) !== 'signed') return done();
      done(this.verifySignature(request, signature));
    });
    // Every 4xx answered to a delivery whose signature did not verify counts against its address.
    fastify.addHook('onResponse', (request, reply, done) => {
      const status = reply.statusCode;
      if (routeAccess(request) === 'signed' && status >= 400 && status < 500 && status !== 429 && request.signatureVerified === undefined) {
        this.signatures.recordFailure(request.ip);
      }
      done();
    });
  }

  private apiKey(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    authenticateRequest(request, this.clients, this.failedAuth).then(
      (outcome) => {
        if (outcome !== undefined && 'id' in outcome) return done();
        if (outcome !== undefined) return this.failedAuth.refuse(request, reply, outcome.blockedFor);
        closeIfBodyUnread(request, reply);
        sendProblem(reply, problems.unauthorized());
      },
      (error: Error) => done(error),
    );
  }

  private metricsToken(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    const address = remoteAddress(request);
    if (!this.metricsServedHere) {
      const blocked = this.failedAuth.fail(address);
      if (blocked) return this.failedAuth.refuse(request, reply, blocked.blockedFor);
      return sendProblem(reply, problems.notFound(`Cannot ${request.method} /metrics`));
    }
    const verdict = this.metrics.check(request.headers.authorization, address);
    if (verdict === 'allowed') return done();
    if (verdict === 'unauthorized') return sendProblem(reply, problems.unauthorized('Send Authorization: Bearer <METRICS_TOKEN>.'));
    this.failedAuth.refuse(request, reply, verdict.retryAfterSeconds);
  }

  private beforeSignedBody(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, signature: RequestSignature): void {
    const seconds = this.signatures.blockedFor(request.ip);
    if (seconds === undefined || signature.looksSigned(request.headers)) return done();
    closeIfBodyUnread(request, reply);
    sendProblem(reply, this.signatures.refusal(seconds));
  }

  /** Undefined once the signature verified; else the error to answer (400, or 429 from an address over its budget of invalid signatures). */
  private verifySignature(request: FastifyRequest, signature: RequestSignature): Error | undefined {
    try {
      signature.verify(request);
      request.signatureVerified = true;
      return undefined;
    } catch (error) {
      if (!(error instanceof InvalidSignatureError)) return error as Error;
      const seconds = this.signatures.blockedFor(request.ip);
      if (seconds !== undefined) return this.signatures.refusal(seconds);
      return new ProblemException({ status: 400, code: 'invalid_webhook_signature', title: 'Invalid Webhook Signature', detail: error.message });
    }
  }
}

/**
 * The request's client from `Authorization: Bearer <key>`, kept on the
 * request; else why not:
 *
 * - a key this instance holds in memory passes at once, whatever the address;
 * - from an address over its failed-auth budget, anything else is Blocked,
 *   with no lookup: a made-up key costs no query;
 * - otherwise the failure is counted against the address (undefined), after
 *   one lookup of the key in the database if it has one (ClientsService.lookUp,
 *   in the address's turn: its lookups stop at its budget however many
 *   requests it sends at once).
 */
async function authenticateRequest(req: FastifyRequest, clients: ClientsService, failedAuth: FailedAuthLimiter): Promise<AuthenticatedClient | Blocked | undefined> {
  const key = bearerToken(req.headers.authorization);
  const held = key === undefined ? undefined : clients.held(key);
  if (held) return (req.client = held);
  const address = remoteAddress(req);
  if (key === undefined) return failedAuth.fail(address);
  const blockedFor = failedAuth.blockedFor(address);
  if (blockedFor !== undefined) return { blockedFor };
  const found = await failedAuth.inTurn(address, async () => {
    const client = await clients.lookUp(key);
    if (!client) failedAuth.recordFailure(address);
    return client;
  });
  if (found !== undefined && 'id' in found) req.client = found;
  return found;
}
