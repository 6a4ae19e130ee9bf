import { INestApplication } from '@nestjs/common';
import { json } from 'express';
import helmet from 'helmet';
import type { Express, NextFunction, Request, Response } from 'express';
import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { FailedAuthLimiter } from './auth/failed-auth.limiter';
import { refuseDeepJson } from './common/json-depth';
import { ProblemDetailsFilter } from './common/problem-details.filter';
import { createValidationPipe } from './common/validation.pipe';
import { AppConfig } from './config/config';
import { IDEMPOTENCY_OPTIONS, applyIdempotencyPolicy, policyMarkdown } from './idempotency';
import type { ResolvedIdempotencyOptions } from './idempotency';

/**
 * Everything main.ts does to the app besides listening, shared with the tests so
 * they exercise the same pipeline: body limit, validation, problem+json errors,
 * CORS, OpenAPI.
 */
export function configureApp(app: NestExpressApplication, config: AppConfig): INestApplication {
  app.useLogger(app.get(Logger));
  app.use(securityHeaders());
  // Before the body parser: an address over its failed-auth budget costs no body read and no query.
  app.use(app.get(FailedAuthLimiter).middleware());
  // Size and depth are checked on the raw bytes, before the body is parsed or anything walks it
  // (express.json directly: Nest's useBodyParser keeps `verify` for its rawBody option).
  app.use(json({ limit: config.bodyLimitBytes, verify: refuseDeepJson() }));
  app.useGlobalPipes(createValidationPipe());
  app.useGlobalFilters(new ProblemDetailsFilter());
  app.set('x-powered-by', false);
  app.set('etag', false);
  if (config.corsOrigins.length) {
    app.enableCors({
      origin: config.corsOrigins,
      allowedHeaders: ['Idempotency-Key', 'Authorization', 'Content-Type', 'X-Request-Id'],
      exposedHeaders: ['Idempotent-Replayed', 'Retry-After', 'X-Request-Id', 'Location', 'Link'],
      maxAge: 600,
    });
  }
  setupOpenApi(app);
  answerMalformedRequestsWithProblems(app);
  return app;
}

/**
 * Headers of every response. Payments data must not be kept by a browser or a
 * proxy (Cache-Control: no-store); nothing may frame the API or the docs; the
 * CSP is the strictest the Swagger UI at /docs works with (its scripts are
 * served from here, its styles are inline, its icons data: URIs).
 */
function securityHeaders() {
  const headers = helmet({
    contentSecurityPolicy: {
      useDefaults: true,
      directives: { 'frame-ancestors': ["'none'"], 'upgrade-insecure-requests': null },
    },
    frameguard: { action: 'deny' },
  });
  return (req: Request, res: Response, next: NextFunction) => {
    res.setHeader('Cache-Control', 'no-store');
    headers(req, res, next);
  };
}

/**
 * Requests Node's HTTP parser refuses (a control character in a header, a
 * broken request line) never reach Nest; answer them as problem+json too.
 */
function answerMalformedRequestsWithProblems(app: NestExpressApplication): void {
  const server = app.getHttpServer() as Server;
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    if (!socket.writable || !error.code?.startsWith('HPE_')) {
      socket.destroy();
      return;
    }
    const body = JSON.stringify({ type: 'about:blank', title: 'Bad Request', status: 400, detail: 'The request is not valid HTTP.', code: 'bad_request' });
    socket.end(
      `HTTP/1.1 400 Bad Request\r\nContent-Type: application/problem+json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}

function setupOpenApi(app: NestExpressApplication): void {
  const policy = app.get<ResolvedIdempotencyOptions>(IDEMPOTENCY_OPTIONS);
  const markdown = policyMarkdown(policy);
  // The policy page is the `type` of every idempotency problem; it needs no key.
  (app.getHttpAdapter().getInstance() as Express).get(policy.policyUrl, (_req, res) => {
      res.type('text/markdown; charset=utf-8').send(markdown);
    });
  const document = applyIdempotencyPolicy(SwaggerModule.createDocument(
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
  );
  SwaggerModule.setup('docs', app, document, { jsonDocumentUrl: 'docs-json' });
}
