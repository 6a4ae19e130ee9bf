import { applyDecorators } from '@nestjs/common';
import { ApiResponse } from '@nestjs/swagger';

const DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request (`validation_failed` lists the fields); nothing was written and the key was not consumed.',
  401: 'Missing or invalid API key (`unauthorized`).',
  402: 'The card was declined (`card_declined`, `insufficient_funds`): a failed payment was recorded; stored and replayed.',
  404: 'No such resource for this client (`not_found`).',
  422: 'A business rule refused the request (stored and replayed), or the key was reused with another request.',
  502: 'The card network failed (`card_network_error`); nothing was recorded and the key was released: retry.',
  503: 'The database is unreachable (`service_unavailable`); retry after Retry-After with the same key.',
};

/** Documents problem+json error responses (schema `Problem`, see idempotency.policy.ts). */
export function ApiProblems(...statuses: number[]): MethodDecorator & ClassDecorator {
  return applyDecorators(
    ...statuses.map((status) =>
      ApiResponse({
        status,
        description: DESCRIPTIONS[status] ?? 'Error',
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
      }),
    ),
  );
}
