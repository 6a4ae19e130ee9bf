import { StoredResponse } from '../contract/idempotency.store';
import { Answering } from '../core/keyed-operation';

/** What a GraphQL field or a message handler answers: the handler's value (as stored), and whether it was replayed. */
export interface ValueAnswer {
  value: unknown;
  replayed: boolean;
}

/**
 * A stored business outcome (IdempotentOutcome) replayed to a context that has
 * no HTTP status to give it: each context answers it as an error with the
 * stored status and body.
 */
export class ReplayedOutcome extends Error {
  override name = 'ReplayedOutcome';
  constructor(readonly response: StoredResponse) {
    super(`the operation ended with the outcome ${response.status}`);
  }
}

/**
 * A handler's value stored as its JSON, and both the first answer and every
 * replay that JSON parsed, so a retry sees exactly what the first call saw. A
 * business outcome stands as the handler threw it, and as a ReplayedOutcome
 * when replayed.
 */
export const VALUE_ANSWERS: Answering<ValueAnswer> = {
  stored: (value) => ({ status: 200, body: value === undefined ? '' : (JSON.stringify(value) ?? ''), contentType: 'application/json' }),
  answer(response, replayed, thrown) {
    if (thrown) throw thrown.error;
    if (response.status >= 400) throw new ReplayedOutcome(response);
    return { value: response.body === '' ? undefined : (JSON.parse(response.body) as unknown), replayed };
  },
};
