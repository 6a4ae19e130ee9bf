import { HttpException } from '@nestjs/common';
import { IDEMPOTENT_OUTCOME, IdempotentOutcome, OutcomeResponse } from 'safe-retries';

/**
 * RFC 9457 problem details. Every error this service sends has this shape, with
 * a stable machine `code` clients can switch on. Feature errors subclass
 * ProblemException (see payments.errors.ts); the idempotency module's problems
 * (IdempotencyProblem) are complete responses of their own, in the same shape.
 */
export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  [extension: string]: unknown;
}

export interface ProblemInit {
  status: number;
  code: string;
  title: string;
  detail: string;
  /** A URI describing the problem type; `about:blank` when the status says it all. */
  type?: string;
  /** Extra response headers (Retry-After, Link, WWW-Authenticate, ...). */
  headers?: Record<string, string>;
  /** Extension members added to the body (e.g. `errors` for validation). */
  extensions?: Record<string, unknown>;
}

export class ProblemException extends HttpException {
  readonly code: string;
  readonly headers: Record<string, string>;

  constructor(readonly problem: ProblemInit) {
    super(problem.detail, problem.status);
    this.code = problem.code;
    this.headers = problem.headers ?? {};
    this.name = new.target.name;
  }

  toBody(): ProblemBody {
    return {
      type: this.problem.type ?? 'about:blank',
      title: this.problem.title,
      status: this.problem.status,
      detail: this.problem.detail,
      code: this.problem.code,
      ...this.problem.extensions,
    };
  }
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** Retry-After (seconds) sent with every 503. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 2;

export const problems = {
  unauthorized: (detail = 'A valid API key is required: send Authorization: Bearer <key>.') =>
    new ProblemException({
      status: 401,
      code: 'unauthorized',
      title: 'Unauthorized',
      detail,
      headers: { 'WWW-Authenticate': 'Bearer' },
    }),
  notFound: (detail: string) => new ProblemException({ status: 404, code: 'not_found', title: 'Not Found', detail }),
  validationFailed: (errors: { field: string; messages: string[] }[]) =>
    new ProblemException({
      status: 400,
      code: 'validation_failed',
      title: 'Validation Failed',
      detail: `Invalid request: ${errors.map((e) => e.field).join(', ')}.`,
      extensions: { errors },
    }),
  serviceUnavailable: (detail = 'The database is unreachable. Retry later with the same Idempotency-Key.') =>
    new ProblemException({
      status: 503,
      code: 'service_unavailable',
      title: 'Service Unavailable',
      detail,
      headers: { 'Retry-After': String(UNAVAILABLE_RETRY_AFTER_SECONDS) },
    }),
  rateLimited: (retryAfterSeconds: number, detail = 'Too many requests. Retry after Retry-After seconds.') =>
    new ProblemException({
      status: 429,
      code: 'rate_limited',
      title: 'Too Many Requests',
      detail,
      headers: { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))) },
    }),
  internal: () =>
    new ProblemException({
      status: 500,
      code: 'internal_error',
      title: 'Internal Server Error',
      detail: 'An unexpected error occurred. It was logged with the request id.',
    }),
};

/**
 * A business outcome (a declined card, a business rule refused): answered as
 * problem+json like any error, but under `@Idempotent()` its writes commit and
 * its response is stored and replayed (see idempotency/idempotent-outcome.ts).
 */
export class BusinessOutcomeException extends ProblemException implements IdempotentOutcome {
  [IDEMPOTENT_OUTCOME](): OutcomeResponse {
    return {
      status: this.problem.status,
      contentType: `${PROBLEM_CONTENT_TYPE}; charset=utf-8`,
      body: JSON.stringify(this.toBody()),
    };
  }
}
