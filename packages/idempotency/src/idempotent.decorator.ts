import { UseInterceptors, applyDecorators } from '@nestjs/common';
import { ApiExtension, ApiHeader, ApiResponse } from '@nestjs/swagger';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { parseDuration } from './duration';
import { X_IDEMPOTENCY, resolveTiming } from './idempotency.options';
import { IdempotentOptions } from './module-options';
import { IdempotentMetadata } from './idempotent-routes';
import { MAX_KEY_LENGTH } from './idempotency-key';


const problem = { $ref: '#/components/schemas/Problem' };

/**
 * Makes a route exactly-once per (client, Idempotency-Key): the first request
 * runs once inside a transaction that also stores its response; retries get
 * that response back with `Idempotent-Replayed: true`; a concurrent duplicate
 * gets 409, a reused key with another request 422. It documents itself in the
 * OpenAPI document (header, responses, `x-idempotency`).
 */
export function Idempotent(options: IdempotentOptions = {}): MethodDecorator & ClassDecorator {
  // What can be checked before the module's options are known; the interceptor checks the rest.
  const { leaseMs, retentionMs } = resolveTiming(options, undefined, '@Idempotent()');
  const required = options.required ?? true;
  // Parsed here too, so that a bad duration fails where the route is declared.
  const waitMs = options.wait === undefined ? 0 : parseDuration(options.wait);
  return applyDecorators(
    IdempotentMetadata(options),
    UseInterceptors(IdempotencyInterceptor),
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
    }),
  );
}
