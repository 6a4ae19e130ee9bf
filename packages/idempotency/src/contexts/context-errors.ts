import { ArgumentsHost, Catch, ExceptionFilter } from '@nestjs/common';
import { Observable, throwError } from 'rxjs';
import { IdempotencyErrorCode, IdempotencyProblem } from '../contract/idempotency.errors';
import { ReplayedOutcome } from './value-answers';

/**
 * The module's problems as a GraphQL resolver or a message handler answers
 * them: the HTTP problem's code in the form GraphQL servers use for
 * `extensions.code` (and messages for `code`), with `retryAfter` (seconds)
 * where the HTTP answer has Retry-After.
 */
export const CONTEXT_ERROR_CODES = {
  [IdempotencyErrorCode.KeyMissing]: 'IDEMPOTENCY_KEY_MISSING',
  [IdempotencyErrorCode.KeyInvalid]: 'IDEMPOTENCY_KEY_INVALID',
  [IdempotencyErrorCode.KeyReused]: 'IDEMPOTENCY_KEY_REUSED',
  [IdempotencyErrorCode.InProgress]: 'IDEMPOTENCY_KEY_IN_USE',
  [IdempotencyErrorCode.LeaseLost]: 'IDEMPOTENCY_LEASE_LOST',
  [IdempotencyErrorCode.WriteOutsideTransaction]: 'IDEMPOTENCY_WRITE_OUTSIDE_TRANSACTION',
  [IdempotencyErrorCode.ScopeMissing]: 'IDEMPOTENCY_SCOPE_MISSING',
} as const satisfies Record<IdempotencyErrorCode, string>;

/** A stored business outcome replayed where there is no HTTP status to give it. */
export const REPLAYED_OUTCOME_CODE = 'IDEMPOTENT_OUTCOME';

export type ContextErrorCode = (typeof CONTEXT_ERROR_CODES)[IdempotencyErrorCode] | typeof REPLAYED_OUTCOME_CODE;

/** What a GraphQL client or a message's sender is told of a problem. */
export interface ContextErrorDetails {
  code: ContextErrorCode;
  /** Seconds before a retry with the same key (IDEMPOTENCY_KEY_IN_USE, IDEMPOTENCY_LEASE_LOST). */
  retryAfter?: number;
  /** A replayed business outcome: the HTTP status and the body it was stored with. */
  outcome?: { status: number; body: unknown };
}

/**
 * A problem of the module in a GraphQL resolver. GraphQL servers (graphql-js,
 * so Apollo and Mercurius alike) copy an error's own `extensions` into the
 * GraphQL error they answer, so the client reads `extensions.code` with no
 * dependency of this module on `graphql`.
 */
export class IdempotencyGraphQLError extends Error {
  override name = 'IdempotencyGraphQLError';
  constructor(
    message: string,
    readonly extensions: ContextErrorDetails,
  ) {
    super(message);
  }
}

/**
 * A problem of the module in a message handler: the sender receives `error`
 * (`{ status: 'error', code, message, retryAfter? }`), as Nest's RPC layer
 * answers an RpcException whose error is an object.
 */
export class IdempotencyMessageError extends Error {
  override name = 'IdempotencyMessageError';
  readonly error: { status: 'error'; message: string } & ContextErrorDetails;
  constructor(message: string, details: ContextErrorDetails) {
    super(message);
    this.error = { status: 'error', message, ...details };
  }
}

/** The details of an IdempotencyProblem or a ReplayedOutcome; undefined for any other error. */
function detailsOf(error: unknown): { message: string; details: ContextErrorDetails } | undefined {
  if (error instanceof IdempotencyProblem) {
    const retryAfter = error.headers['Retry-After'];
    const { detail } = error.getResponse();
    return { message: detail, details: { code: CONTEXT_ERROR_CODES[error.code], ...(retryAfter ? { retryAfter: Number(retryAfter) } : {}) } };
  }
  if (error instanceof ReplayedOutcome) {
    const { status, body } = error.response;
    let outcome: unknown = body;
    try {
      outcome = JSON.parse(body) as unknown;
    } catch {
      // A text outcome is replayed as its text.
    }
    return { message: error.message, details: { code: REPLAYED_OUTCOME_CODE, outcome: { status, body: outcome } } };
  }
  return undefined;
}

/** The module's problems as GraphQL errors; any other error unchanged. */
export function asGraphQLError(error: unknown): unknown {
  const found = detailsOf(error);
  return found ? new IdempotencyGraphQLError(found.message, found.details) : error;
}

/** The module's problems as message errors; any other error unchanged. */
export function asMessageError(error: unknown): unknown {
  const found = detailsOf(error);
  return found ? new IdempotencyMessageError(found.message, found.details) : error;
}

/**
 * Applied with @Idempotent(), so the module's GraphQL and message errors are
 * answered as such whatever filters the app has (a handler's own filter comes
 * before the app's global ones): a GraphQL error goes on to the GraphQL
 * server; a message error becomes the error the sender receives. HTTP routes
 * never throw either: their problems are answered by the interceptor.
 */
@Catch(IdempotencyGraphQLError, IdempotencyMessageError)
export class IdempotencyContextErrorsFilter implements ExceptionFilter {
  catch(exception: IdempotencyGraphQLError | IdempotencyMessageError, _host: ArgumentsHost): Observable<never> {
    if (exception instanceof IdempotencyMessageError) return throwError(() => exception.error);
    throw exception;
  }
}
