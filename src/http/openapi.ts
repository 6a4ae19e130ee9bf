import { applyDecorators } from '@nestjs/common';
import { ApiResponse } from '@nestjs/swagger';

const DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request (`validation_failed` lists the fields); nothing was written and the key was not consumed.',
  401: 'Missing or invalid API key (`unauthorized`).',
  402: 'The card network did not charge the card (`card_declined`, `insufficient_funds`, `authentication_required` for a card that needs its holder to authenticate, `payment_canceled`): a failed payment was recorded; stored and replayed.',
  404: 'No such resource for this client (`not_found`).',
  422: 'A business rule refused the request (stored and replayed), or the key was reused with another request.',
  429: 'A limit was reached (`rate_limited`); nothing was done and the key was released: retry after Retry-After with the same key.',
  502: "The card network's own word about this operation shows nothing was charged or refunded (`card_network_error`); nothing was recorded and the key was released: retry.",
  503: 'Retry after Retry-After with the same key and body: the database is unreachable (`service_unavailable`), the card network gave no answer that settles the operation (`card_network_unavailable`: the charge may have happened; the retry resumes and never charges twice), or the network is still processing the payment (`payment_processing`).',
};

/** Documents problem+json error responses (schema `Problem`, see applyIdempotencyPolicy in safe-retries/swagger). */
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
