import { UseFilters, UseInterceptors, applyDecorators } from '@nestjs/common';
import { IdempotencyContextErrorsFilter } from '../contexts/context-errors';
import { IdempotentRouteInterceptor } from './idempotent-route.interceptor';
import { parseDuration } from '../config/duration';
import { resolveTiming } from '../config/idempotency.options';
import { IdempotentMetadata } from '../routes/idempotent-routes';
import { IdempotentOptions } from '../config/module-options';

/**
 * Makes a route exactly-once per (client, Idempotency-Key): the first request
 * runs once inside a transaction that also stores its response; retries get
 * that response back with `Idempotent-Replayed: true`; a concurrent duplicate
 * gets 409, a reused key with another request 422. On a GraphQL mutation or a
 * microservice handler the same holds with its key read per `key`, its value
 * replayed and its problems answered as GraphQL or message errors. Its OpenAPI description
 * (header, responses, `x-idempotency`) comes from `safe-retries/swagger`
 * (describeIdempotentRoutes), so this entry never loads @nestjs/swagger.
 * A controller with such routes compiles in a testing module without
 * IdempotencyModule; an app without it stops at startup (IdempotentRouteInterceptor).
 */
export function Idempotent(options: IdempotentOptions = {}): MethodDecorator & ClassDecorator {
  // What can be checked before the module's options are known; the module checks the rest at startup.
  resolveTiming(options, undefined, '@Idempotent()');
  // Parsed here too, so that a bad duration fails where the route is declared.
  if (options.wait !== undefined) parseDuration(options.wait);
  return applyDecorators(IdempotentMetadata(options), UseInterceptors(IdempotentRouteInterceptor), UseFilters(IdempotencyContextErrorsFilter));
}
