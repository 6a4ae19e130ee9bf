import { INestApplicationContext, applyDecorators } from '@nestjs/common';
import { ApiExtension, ApiHeader, ApiResponse } from '@nestjs/swagger';
import { parseDuration } from '../config/duration';
import { resolveTiming } from '../config/idempotency.options';
import { MAX_KEY_LENGTH } from '../core/idempotency-key';
import { IdempotentRoute, IdempotentRoutes, messagePatterns } from '../routes/idempotent-routes';
import { IdempotentOptions } from '../config/module-options';

/** The OpenAPI extension each @Idempotent() operation carries. */
export const X_IDEMPOTENCY = 'x-idempotency';

const problem = { $ref: '#/components/schemas/Problem' };

/** The routes (handlers, or controllers for `@Idempotent()` on a class) described so far in this process. */
const described = new WeakSet<object>();

/**
 * Describes every @Idempotent() route of `app` for the OpenAPI document that
 * `SwaggerModule.createDocument(app, ...)` builds next, through
 * @nestjs/swagger's own decorators: the Idempotency-Key header, the module's
 * problems (400; 409 with Retry-After; 422) and the `x-idempotency` extension,
 * whose lease and retention applyIdempotencyPolicy then fills in from the
 * running configuration. Call it before createDocument; each route is
 * described once, however many apps a process creates.
 */
export function describeIdempotentRoutes(app: INestApplicationContext): void {
  const routes = app.get(IdempotentRoutes, { strict: false });
  for (const route of routes.list) {
    // A GraphQL resolver or a message handler has no HTTP route to describe.
    if (route.provider || messagePatterns(route.handler) !== undefined) continue;
    const target = route.onClass ? route.controller : route.handler;
    if (described.has(target)) continue;
    described.add(target);
    // Resolved as the interceptor will run it: a route that cannot work stops the app here, saying which.
    const oneCommit = routes.settingsOf(route).oneCommit !== undefined;
    const decorate = openApiOf(route.options, oneCommit);
    if (route.onClass) decorate(route.controller);
    else decorate(route.controller.prototype, route.method, handlerDescriptor(route));
  }
}

/** What @nestjs/swagger's method decorators read of a method: its function. */
function handlerDescriptor(route: IdempotentRoute): PropertyDescriptor {
  return { value: route.handler, writable: true, enumerable: false, configurable: true };
}

/** The OpenAPI metadata of a route with these options (`oneCommit`: it commits once, see `commit`). */
function openApiOf(options: IdempotentOptions, oneCommit: boolean): ReturnType<typeof applyDecorators> {
  const { leaseMs, retentionMs } = resolveTiming(options, undefined, '@Idempotent()');
  const required = options.required ?? true;
  const waitMs = options.wait === undefined ? 0 : parseDuration(options.wait);
  return applyDecorators(
    ApiHeader({
      name: 'Idempotency-Key',
      required,
      description: 'One unique value per operation, sent unchanged on every retry (filled in with the policy at startup).',
      schema: { type: 'string', minLength: 1, maxLength: MAX_KEY_LENGTH, example: '8e03978e-40d5-43e8-bc93-6894a57f9324' },
    }),
    ApiResponse({ status: 400, description: 'Idempotency-Key missing or invalid (`idempotency_key_missing`, `idempotency_key_invalid`), or the request is invalid.', content: { 'application/problem+json': { schema: problem } } }),
    ApiResponse({
      status: 409,
      description: 'A request with this key is still in progress (`idempotency_request_in_progress`), or this attempt lost its lease (`idempotency_lease_lost`). Retry after Retry-After with the same key and body.',
      headers: { 'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } } },
      content: { 'application/problem+json': { schema: problem } },
    }),
    ApiResponse({ status: 422, description: 'The key was used with a different request (`idempotency_key_reused`), or a business rule refused the request (stored and replayed).', content: { 'application/problem+json': { schema: problem } } }),
    ApiExtension(X_IDEMPOTENCY, {
      header: 'Idempotency-Key',
      required,
      lease: leaseMs ?? null,
      retention: retentionMs ?? null,
      scope: 'client',
      // How long (ms) a duplicate of a request in progress waits for its replay before 409.
      ...(waitMs > 0 ? { wait_ms: waitMs } : {}),
      // Where the key is kept, when the route names it (redis: not atomic with the database).
      ...(options.store ? { store: options.store } : {}),
      // One commit per new key: the lease bounds the request's transaction, and a crash frees the key at once.
      ...(oneCommit ? { commit: 'one' } : {}),
    }),
  );
}
