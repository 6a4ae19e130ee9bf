import type { Socket } from 'node:net';
import { Logger } from '@nestjs/common';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import type { FastifyInstance, RouteOptions } from 'fastify';
import { CLS_REQ, ClsService } from 'nestjs-cls';
import { Authentication } from './auth/authentication';
import { RequestSignature } from './auth/request-signature';
import { warnOfDominantAddress, warnOfUntrustedProxy } from './auth/untrusted-proxy.warning';
import { limitConnections } from './http/connection-fairness';
import { connectionLimits, describeLimits } from './http/connection-limits';
import { parseJsonBody } from './http/json-depth';
import { rejectNonJsonBody } from './http/json-only.hook';
import { refuseOptionsBody } from './http/preflight.hook';
import { ProblemException } from './http/problem';
import { ProblemDetailsFilter } from './http/problem-details.filter';
import { readBody } from './http/request-body';
import { newRequestId } from './http/request-id';
import { routeAccess } from './http/route-access';
import { createValidationPipe } from './http/validation.pipe';
import { AppConfig } from './config/config';
import { IDEMPOTENCY_OPTIONS, applyIdempotencyPolicy, describeIdempotentRoutes, policyMarkdown } from 'safe-retries/swagger';
import type { ResolvedIdempotencyOptions } from 'safe-retries/swagger';
import { documentConflicts } from './http/openapi';
import { AppLogger } from './logging/app.logger';
import { ROOT_LOGGER } from './logging/logging.constants';
import { logRequests } from './logging/request-log.hook';
import { connectionMetrics } from './metrics/connection.metrics';
import { observeHttpRequests } from './metrics/http-metrics.hook';
import { MetricsService } from './metrics/metrics.service';
import { ChargeAdmission } from './payments/admission/charge-admission';

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]+)/i;
/** Where the Swagger UI and the OpenAPI document are served (`/docs`, `/docs/*`, `/docs-json`, `/docs-yaml`): public. */
const DOCS_PATH = 'docs';
const UNSUPPORTED_CHARSET = () =>
  new ProblemException({ status: 415, code: 'unsupported_media_type', title: 'Unsupported Media Type', detail: 'Send the request body as UTF-8.' });

/**
 * The HTTP platform of the app: Fastify, with the body limit, the request ids
 * and the answer to malformed HTTP that must be set when the instance is made.
 * main.ts, the tests and the bench all start from it.
 */
export function createHttpAdapter(config: AppConfig): FastifyAdapter {
  const adapter = new FastifyAdapter({
    bodyLimit: config.bodyLimitBytes,
    // `/orders/` is `/orders`, as it was on Express (paths stay case-sensitive: Fastify's default).
    // A path parameter may be an Idempotency-Key (GET /idempotency-keys/{key}): up to 255
    // characters, three times that percent-encoded.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 800 },
    // The request id of the logs and of X-Request-Id.
    genReqId: newRequestId,
    requestIdHeader: false,
    clientErrorHandler: answerMalformedRequestWithProblem,
    // A request must arrive whole (headers and body) within the request timeout (30 s), else
    // 408 and the connection is closed (answerMalformedRequestWithProblem): a trickled
    // body holds a socket for that long, never a charge slot (taken after the body).
    requestTimeout: config.http.requestTimeoutMs,
    // A socket silent in both directions this long is dropped (a client that stops
    // reading its answer): longer than a request may take to arrive plus a lease of
    // work. A handler that works longer (its lease renewed) still completes, and the
    // client's retry replays its stored response.
    connectionTimeout: config.http.requestTimeoutMs + config.idempotency.lease,
    // Longer than a load balancer's idle timeout, so the balancer, not this server,
    // closes an idle connection (never one it is about to reuse).
    keepAliveTimeout: config.http.keepAliveTimeoutMs,
    http: {
      // Node times the headers from a request's first byte, not from the previous
      // answer, so an idle keep-alive connection is bounded by keepAliveTimeout alone;
      // Node requires headersTimeout <= requestTimeout.
      headersTimeout: config.http.requestTimeoutMs,
      requestTimeout: config.http.requestTimeoutMs,
      // Node looks for expired requests this often (30 s by default): the 408 comes
      // within a tenth of the timeout after it (at most 1 s).
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(config.http.requestTimeoutMs / 10))),
    },
    // `request.ip` is the address X-Forwarded-For gives, past the proxies of HTTP_TRUST_PROXY only.
    trustProxy: config.http.trustProxy.length ? config.http.trustProxy : false,
  });
  return adapter;
}

/**
 * Everything main.ts does to the app besides listening, shared with the tests so
 * they exercise the same pipeline: security headers, failed-auth limiter, body
 * limit and JSON checks, validation, problem+json errors, metrics, CORS, OpenAPI.
 */
export function configureApp(app: NestFastifyApplication, config: AppConfig): NestFastifyApplication {
  const fastify = app.getHttpAdapter().getInstance();
  // Before any route is registered (the docs below, the controllers at init).
  configureRoutes(fastify);
  // First: every hook after it, the guards, the handler and the logger run in the request's context.
  openRequestContext(fastify, app.get(ClsService));
  app.useLogger(app.get(AppLogger));
  limitAppConnections(fastify, config, app.get(MetricsService));
  logRequests(fastify, app.get(ROOT_LOGGER));
  // Before any middleware (Nest runs them in a request hook ahead of middie), for 404s and
  // the router's own 400s too. Payments data must not be kept by a browser or a proxy (the
  // no-store below); nothing may frame the API or the docs; the CSP is the strictest the
  // Swagger UI at /docs works with (its scripts are served from here, its styles are
  // inline, its icons data: URIs).
  app.useSecurityHeaders({
    contentSecurityPolicy: { useDefaults: true, directives: { 'frame-ancestors': ["'none'"], 'upgrade-insecure-requests': null } },
    xFrameOptions: { action: 'deny' },
  });
  // Fastify onRequest hooks, not Nest middleware (which runs through @fastify/middie):
  // they run before the body is read.
  fastify.addHook('onRequest', (request, reply, done) => {
    reply.raw.setHeader('Cache-Control', 'no-store');
    reply.raw.setHeader('X-Request-Id', request.id);
    done();
  });
  warnOfUntrustedProxy(fastify, config);
  // A preflight reads no body: one that announces a body is refused before it is read, ahead
  // of the adapter's CORS hook (Nest's first request hook, the adapter's documented slot).
  (app.getHttpAdapter() as FastifyAdapter).setOnRequestHook(refuseOptionsBody);
  // Every request is authenticated here, by its route's declared access, before its body is
  // read (a signature, which is over the body, once it has arrived, before it is parsed):
  // without a valid credential, no body read, no query for a made-up key from a blocked
  // address, no slot taken.
  app.get(Authentication).install(fastify, app.get(RequestSignature));
  fastify.addHook('onRequest', rejectNonJsonBody);
  // The routes that reach the card network (@ChargeRoute()), authenticated above, take turns
  // once their body has arrived: a request without a valid key never takes or waits for a
  // slot, nor does a body that is slow or never comes.
  fastify.addHook('preHandler', app.get(ChargeAdmission).hook());
  // Size (bodyLimit) and depth are checked on the raw bytes, before the body is parsed or anything walks it.
  fastify.removeContentTypeParser('application/json');
  // readBody: a half-sent body holds at most twice the bytes it sent, whatever its pace.
  fastify.addContentTypeParser('application/json', (request, payload, done) =>
    readBody(request, payload, (readError, body) => {
      if (readError || body === undefined) return done(readError, undefined);
      // A signed route (the webhooks) gets the exact bytes that were signed, unparsed: nothing
      // reads them before their signature verifies.
      if (routeAccess(request) === 'signed') {
        request.rawBody = body;
        return done(null, undefined);
      }
      try {
        // The depth is counted on UTF-8 bytes and the text decoded as UTF-8: another charset is refused.
        const charset = CHARSET.exec(request.headers['content-type'] ?? '')?.[1].toLowerCase();
        if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') throw UNSUPPORTED_CHARSET();
        done(null, parseJsonBody(body));
      } catch (error) {
        done(error as Error, undefined);
      }
    }),
  );
  app.useGlobalPipes(createValidationPipe());
  app.useGlobalFilters(new ProblemDetailsFilter());
  observeHttpRequests(fastify, app.get(MetricsService));
  if (config.corsOrigins.length) {
    app.enableCors({
      origin: config.corsOrigins,
      allowedHeaders: ['Idempotency-Key', 'Authorization', 'Content-Type', 'X-Request-Id'],
      exposedHeaders: ['Idempotent-Replayed', 'Retry-After', 'X-Request-Id', 'Location', 'Link'],
      maxAge: 600,
    });
  }
  setupOpenApi(app, fastify);
  return app;
}

/**
 * The connections the server holds: a total that leaves descriptors and memory for
 * the process's own work, shared fairly between addresses (connection-fairness.ts);
 * the derivation is logged at boot, the counts are on /metrics, and an undeclared
 * proxy (one address holding most connections) is warned of.
 */
function limitAppConnections(fastify: FastifyInstance, config: AppConfig, metrics: MetricsService): void {
  const limits = connectionLimits(config);
  new Logger('Connections').log({ ...limits }, describeLimits(limits));
  const observed = connectionMetrics(metrics);
  const table = limitConnections(fastify.server, limits.total, config.http.trustProxy, { ...observed.events, dominant: warnOfDominantAddress(config) });
  observed.observe(table);
}

/**
 * What routes declare for the hooks before their body is read (see RouteAccess):
 * a route's `maxBodyBytes` becomes its Fastify `bodyLimit` (413 past it: on the
 * Content-Length before any byte is read, else as soon as the bytes read pass it; the
 * connection is closed with it, as after any body Fastify refuses), and the docs' routes,
 * which @nestjs/swagger and @fastify/static register, are public.
 */
function configureRoutes(fastify: FastifyInstance): void {
  fastify.addHook('onRoute', function (route) {
    // A route answers its errors (an unparsable body, ...) with the error handler its instance
    // has when the error happens, not the one it had when Fastify built the route: Nest sets its
    // exception layer at the end of init, after the GraphQL driver has loaded its plugin (which
    // builds every route declared so far).
    if (route.errorHandler === undefined) route.errorHandler = answerWithCurrentErrorHandler(this);
    const { maxBodyBytes } = route.config ?? {};
    if (maxBodyBytes !== undefined) route.bodyLimit = maxBodyBytes;
    const path = route.url ?? route.path;
    if (path === `/${DOCS_PATH}` || path.startsWith(`/${DOCS_PATH}/`) || path.startsWith(`/${DOCS_PATH}-`)) {
      route.config = { ...route.config, access: 'public' };
    }
  });
}

/** An error handler that hands the error to the one `instance` has when the error happens. */
function answerWithCurrentErrorHandler(instance: FastifyInstance): NonNullable<RouteOptions['errorHandler']> {
  return (error, request, reply) => instance.errorHandler(error, request, reply);
}

/**
 * nestjs-cls's context for each request (the ambient transaction, the
 * idempotency key of the request, the request id of log lines), opened in a
 * Fastify onRequest hook in place of nestjs-cls's middleware
 * (`transactionalClsModule({ middleware: false })`): with no Nest middleware
 * left, @fastify/middie has nothing to run per request. CLS_REQ is the Fastify
 * request (its `id` is the request id).
 */
function openRequestContext(fastify: FastifyInstance, cls: ClsService): void {
  fastify.addHook('onRequest', (request, _reply, done) => {
    cls.run(() => {
      cls.set(CLS_REQ, request);
      done();
    });
  });
}

/**
 * Requests Node's HTTP parser refuses (a control character in a header, a
 * broken request line) never reach a route; answer them as problem+json too,
 * and a request that did not arrive whole within requestTimeout (Node's
 * ERR_HTTP_REQUEST_TIMEOUT) with 408. The connection is closed either way.
 */
function answerMalformedRequestWithProblem(error: Error & { code?: string }, socket: Socket): void {
  const timedOut = error.code === 'ERR_HTTP_REQUEST_TIMEOUT';
  if (!socket.writable || !(timedOut || error.code?.startsWith('HPE_'))) {
    socket.destroy();
    return;
  }
  const [status, title, detail, code] = timedOut
    ? [408, 'Request Timeout', 'The request did not arrive whole in time.', 'request_timeout']
    : [400, 'Bad Request', 'The request is not valid HTTP.', 'bad_request'];
  const body = JSON.stringify({ type: 'about:blank', title, status, detail, code });
  socket.end(
    `HTTP/1.1 ${status} ${title}\r\nContent-Type: application/problem+json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

function setupOpenApi(app: NestFastifyApplication, fastify: FastifyInstance): void {
  const policy = app.get<ResolvedIdempotencyOptions>(IDEMPOTENCY_OPTIONS);
  const markdown = policyMarkdown(policy);
  // The policy page is the `type` of every idempotency problem (the module's policyUrl); it needs no key.
  fastify.get(policy.policyUrl ?? '/docs/idempotency', { config: { access: 'public' } }, (_request, reply) => {
    void reply.type('text/markdown; charset=utf-8').send(markdown);
  });
  // The header, problems and x-idempotency of every @Idempotent() route, before the document is built.
  describeIdempotentRoutes(app);
  const document = documentConflicts(applyIdempotencyPolicy(SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('Safe retries: orders and payments')
      .setVersion('1.0')
      .setDescription('Orders and payments whose state-changing endpoints are exactly-once with an Idempotency-Key header.')
      .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'API key: `Authorization: Bearer sk_...`' })
      .addSecurityRequirements('bearer')
      .build(),
    ),
    policy,
  ));
  SwaggerModule.setup(DOCS_PATH, app, document, { jsonDocumentUrl: `${DOCS_PATH}-json` });
}
