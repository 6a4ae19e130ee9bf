import { applyDecorators } from '@nestjs/common';
import { ApiResponse } from '@nestjs/swagger';
import type { OpenAPIObject, OperationObject } from '@nestjs/swagger';

const DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request (`validation_failed` lists the fields); nothing was written and the key was not consumed.',
  401: 'Missing or invalid API key (`unauthorized`).',
  402: 'The card network did not charge the card (`card_declined`, `insufficient_funds`, `authentication_required` for a card that needs its holder to authenticate, `payment_canceled`): a failed payment was recorded; stored and replayed.',
  404: 'No such resource for this client (`not_found`).',
  410: 'A retry (same Idempotency-Key) of an answer that showed a webhook secret, once a later rotation replaced that secret (`webhook_secret_replaced`): it is not shown again.',
  422: 'A business rule refused the request (stored and replayed), or the key was reused with another request.',
  429: 'A limit was reached (`rate_limited`); nothing was done and the key was released: retry after Retry-After with the same key.',
  502: "The card network's own word about this operation shows nothing was charged or refunded (`card_network_error`); nothing was recorded and the key was released: retry. Or the card network does not know the intent or refund this operation recorded (`card_network_object_unknown`: a wrong account or API key, for an operator): nothing is concluded about the money, the operation is kept and tried again within the hour; retry after Retry-After with the same key.",
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

/**
 * This app's own 409 answers on keyed routes. The library documents its 409
 * (in progress, lease lost) on every @Idempotent() route in place of a route's
 * own, so these are added to that description once the document is built.
 */
const CONFLICTS: Record<string, string> = {
  'post /payments':
    'Or another payment of the order is in progress (`order_payment_conflict`): retry to see its outcome. Or the payment was handed to a person (`requires_attention`, with `payment_id` and `attention_id`): its outcome could not be learned from the card network; the order stays reserved until an operator decides, then the key answers with the outcome.',
  'post /payments/{id}/refunds':
    'Or the refund was handed to a person (`requires_attention`, with `refund_id` and `attention_id`): the card network refuses it and cannot tell whether an earlier attempt refunded, or its outcome stayed unknown; its amount stays reserved until an operator decides, then the key answers with the outcome.',
};

/** Adds CONFLICTS to the 409 of their routes; throws when a route or its 409 is gone (the table must follow the routes). */
export function documentConflicts(document: OpenAPIObject): OpenAPIObject {
  for (const [route, text] of Object.entries(CONFLICTS)) {
    const [method, path] = route.split(' ');
    const operation = (document.paths[path] as Record<string, OperationObject | undefined> | undefined)?.[method];
    const conflict = operation?.responses['409'];
    if (!conflict || !('description' in conflict)) throw new Error(`OpenAPI: ${route} documents no 409 to add its own codes to`);
    conflict.description = `${conflict.description} ${text}`;
  }
  return document;
}
