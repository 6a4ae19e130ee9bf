/**
 * What the client throws once it has stopped retrying. Callers switch on the
 * class and on `code` (the server's stable machine code), never on messages.
 *
 * Both errors carry the `idempotencyKey` the operation used: when the outcome is
 * unknown (every attempt failed), retrying later with that same key and body is
 * the only way to finish the operation without risking a second effect.
 */
import type { KeyOutcome } from './api-types';

/** An RFC 9457 problem details body as our API sends it. */
export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail?: string;
  /** Stable machine code, e.g. `validation_failed`, `idempotency_key_reused`. */
  code: string;
  [extension: string]: unknown;
}

/** The code of a {@link ProblemError} whose body was not a problem details object. */
export const UNKNOWN_PROBLEM_CODE = 'unknown';

/** The code of a {@link ProblemError} raised for a success status whose JSON body could not be parsed. */
export const INVALID_RESPONSE_CODE = 'invalid_response';

export interface ProblemErrorInit {
  type: string;
  title: string;
  status: number;
  detail?: string;
  code: string;
  body: unknown;
  headers: Headers;
  attempts: number;
  idempotencyKey?: string;
}

/**
 * The server answered with an error status that is not retried (400, 401, 402,
 * 404, 422, 500, ...) or with a retryable status on the last attempt. The
 * problem+json fields are copied onto the error; a non-JSON body still gives a
 * ProblemError, with code `unknown` and the raw text as `body`.
 */
export class ProblemError extends Error {
  override readonly name = 'ProblemError';
  /** A URI identifying the problem type; `about:blank` when the server gave none. */
  readonly type: string;
  readonly title: string;
  /** The HTTP status of the response (authoritative over any `status` in the body). */
  readonly status: number;
  readonly detail: string | undefined;
  /** The server's machine code, or `unknown` when the body was not a problem object. */
  readonly code: string;
  /** The parsed JSON body, or the raw text when it was not JSON. */
  readonly body: unknown;
  readonly headers: Headers;
  /** How many requests were sent for this operation. */
  readonly attempts: number;
  /** The key sent with every attempt (POST only). */
  readonly idempotencyKey: string | undefined;
  /**
   * After a POST gave up on a retryable status: where its operation stands, as
   * `GET /idempotency-keys/{key}` answered (undefined when that lookup failed too).
   */
  outcome?: KeyOutcome;

  constructor(init: ProblemErrorInit) {
    super(`${init.status} ${init.title} (${init.code})${init.detail ? `: ${init.detail}` : ''}`);
    this.type = init.type;
    this.title = init.title;
    this.status = init.status;
    this.detail = init.detail;
    this.code = init.code;
    this.body = init.body;
    this.headers = init.headers;
    this.attempts = init.attempts;
    this.idempotencyKey = init.idempotencyKey;
  }
}

/** Why the last attempt produced no response. */
export type NetworkFailure = 'network' | 'timeout';

export interface NetworkErrorInit {
  cause: unknown;
  reason: NetworkFailure;
  attempts: number;
  idempotencyKey?: string;
}

/**
 * No response after the last attempt: the connection failed or every attempt hit
 * the per-attempt timeout. The request may or may not have been processed; for a
 * POST, retry later with the same `idempotencyKey` and body to learn the outcome.
 */
export class NetworkError extends Error {
  override readonly name = 'NetworkError';
  /** `timeout` when the last attempt exceeded `timeoutMs`, `network` otherwise. */
  readonly reason: NetworkFailure;
  readonly attempts: number;
  readonly idempotencyKey: string | undefined;
  /**
   * For a POST: where its operation stands, as `GET /idempotency-keys/{key}`
   * answered after the last attempt (undefined when that lookup failed too).
   */
  outcome?: KeyOutcome;

  constructor(init: NetworkErrorInit) {
    const what = init.reason === 'timeout' ? 'timed out' : 'failed';
    super(`Request ${what} after ${init.attempts} attempt${init.attempts === 1 ? '' : 's'}: ${describe(init.cause)}`, {
      cause: init.cause,
    });
    this.reason = init.reason;
    this.attempts = init.attempts;
    this.idempotencyKey = init.idempotencyKey;
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? ` (${error.cause.message})` : '';
    return `${error.message}${cause}`;
  }
  return String(error);
}
