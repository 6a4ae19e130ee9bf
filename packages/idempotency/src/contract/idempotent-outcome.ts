/**
 * The business-outcome mechanism. A handler reports an outcome on purpose by
 * throwing an error that implements IdempotentOutcome (typically an exception
 * class of the app's own): a declined card (402), a business rule refused (422). Unlike any other error, its writes COMMIT and its
 * response is stored and replayed to every retry, because it happened. Every
 * other exception rolls back and releases the key: nothing happened, retry.
 */
export const IDEMPOTENT_OUTCOME = Symbol.for('safe-retries.idempotent-outcome');

/** What is sent and stored for an outcome: exactly these bytes, on every replay too. */
export interface OutcomeResponse {
  status: number;
  contentType: string;
  body: string;
}

export interface IdempotentOutcome {
  [IDEMPOTENT_OUTCOME](): OutcomeResponse;
}

export function isIdempotentOutcome(error: unknown): error is IdempotentOutcome {
  return typeof (error as Partial<IdempotentOutcome> | null)?.[IDEMPOTENT_OUTCOME] === 'function';
}
