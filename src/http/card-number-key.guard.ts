import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { containsCardNumber } from '../card-numbers/card-number';
import { httpRequestOf } from './http-request';
import { problems } from './problem';

const HEADER = 'idempotency-key';

/**
 * Refuses a request whose Idempotency-Key holds a card number
 * (containsCardNumber): 400 `validation_failed` on `Idempotency-Key`, the value
 * never echoed. A guard, so it runs before any interceptor: the idempotency
 * interceptor never claims, stores or hashes such a key (the idempotency
 * library knows nothing of card data; this rule is the app's).
 *
 * The request line logs the Idempotency-Key header, so the refused value is
 * also taken off the request's headers: the line of this 400 shows none.
 */
@Injectable()
export class CardNumberKeyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    // A route, or a GraphQL operation (its key is the header of the HTTP request carrying it).
    const headers = httpRequestOf<{ headers: Record<string, string | string[] | undefined> }>(context)?.headers;
    if (headers === undefined) return true;
    const value = headers[HEADER];
    if (value === undefined) return true;
    if (!containsCardNumber(Array.isArray(value) ? value.join(',') : value)) return true;
    delete headers[HEADER];
    throw problems.validationFailed([{ field: 'Idempotency-Key', messages: ['Idempotency-Key must not contain a card number'] }]);
  }
}
