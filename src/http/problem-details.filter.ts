import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import { IdempotencyProblem } from 'safe-retries';
import { isDatabaseUnavailable } from '../database/database-errors';
import { describeForLog } from '../logging/describe-error';
import { recordRequestError } from '../logging/request-log.hook';
import { hasLuhnWindow, redactCardNumbers } from '../card-numbers/card-number';
import { GraphQLProblem } from './graphql-problem';
import { AnyResponse, nodeResponse, sendProblem } from './http';
import { httpRequestOf } from './http-request';
import { ProblemException, problems } from './problem';

const CODES_BY_STATUS: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  406: 'not_acceptable',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'too_many_requests',
};

/**
 * The one place an error becomes a response: RFC 9457 problem+json with a
 * stable `code`. Unknown errors are 500s with no detail leaked (class, message
 * and stack go to the log with the request id, and to the request's line); an
 * unreachable database is a 503 with Retry-After, because a retry will succeed
 * once it is back. A GraphQL operation's error is the same problem as a
 * GraphQL error (GraphQLProblem), never problem+json: the GraphQL server
 * answers it in its own response. A message that echoes input (a path value,
 * an unknown field's name, a framework's message) has any card number in it
 * redacted (withoutCardNumbers), over REST and GraphQL alike.
 */
@Catch()
export class ProblemDetailsFilter implements ExceptionFilter {
  private readonly logger = new Logger('Errors');

  catch(exception: unknown, host: ArgumentsHost): void {
    if (host.getType<string>() === 'graphql') {
      const request = httpRequestOf<{ id?: unknown }>(host);
      const problem = withoutCardNumbers(this.toProblem(exception, typeof request?.id === 'string' ? request.id : undefined));
      if (problem.problem.status >= 500 && request) recordRequestError(request, exception);
      throw GraphQLProblem.of(problem);
    }
    const http = host.switchToHttp();
    // The Fastify request: its id is the request id (the app has no Nest middleware, whose Node request would be passed here).
    const request = http.getRequest<{ id?: unknown }>();
    const res = http.getResponse<AnyResponse>();
    const problem = withoutCardNumbers(this.toProblem(exception, typeof request.id === 'string' ? request.id : undefined));
    // The request line of a 5xx shows the exception that caused it.
    if (problem.problem.status >= 500) recordRequestError(request, exception);

    if (nodeResponse(res).headersSent) {
      // The response is already on its way (a replay streaming, a client gone).
      nodeResponse(res).end();
      return;
    }
    sendProblem(res, problem);
  }

  private toProblem(exception: unknown, requestId: string | undefined): ProblemException {
    if (exception instanceof ProblemException) return exception;
    if (exception instanceof HttpException) return this.fromHttpException(exception);
    const clientError = frameworkClientError(exception);
    if (clientError) return this.fromStatus(clientError.statusCode, clientError.message);
    if (isDatabaseUnavailable(exception)) {
      this.logger.warn({ requestId, err: describe(exception) }, 'database unavailable');
      return problems.serviceUnavailable();
    }
    this.logger.error({ requestId, err: describeForLog(exception) }, 'unhandled error');
    return problems.internal();
  }

  private fromHttpException(exception: HttpException): ProblemException {
    if (exception instanceof IdempotencyProblem) {
      // The idempotency module's own problem (e.g. an invalid key outside the interceptor): its code and headers stand.
      const { status, code, title, detail } = exception.getResponse();
      return new ProblemException({ status, code, title, detail, headers: { ...exception.headers } });
    }
    const response = exception.getResponse();
    const message =
      typeof response === 'object' && response !== null && 'message' in response
        ? String((response as { message: unknown }).message)
        : exception.message;
    return this.fromStatus(exception.getStatus(), message);
  }

  private fromStatus(status: number, message: string): ProblemException {
    if (status === HttpStatus.PAYLOAD_TOO_LARGE) {
      return new ProblemException({
        status,
        code: 'payload_too_large',
        title: 'Payload Too Large',
        detail: 'The request body exceeds the size limit.',
      });
    }
    if (status === HttpStatus.SERVICE_UNAVAILABLE) return problems.serviceUnavailable();
    const code = CODES_BY_STATUS[status] ?? (status >= 500 ? 'internal_error' : 'error');
    return new ProblemException({
      status,
      code,
      title: (HttpStatus[status] ?? 'Error').toString().toLowerCase().replace(/(^|_)(\w)/g, (_m, sep: string, c: string) => (sep ? ' ' : '') + c.toUpperCase()),
      detail: status >= 500 ? 'An unexpected error occurred.' : message,
    });
  }
}

/**
 * The problem with every card number in its detail and extension members
 * (`errors`: field names and messages) redacted; the problem itself when it
 * holds none.
 */
function withoutCardNumbers(problem: ProblemException): ProblemException {
  const { detail, extensions } = problem.problem;
  if (!hasLuhnWindow(JSON.stringify([detail, extensions ?? null]))) return problem;
  return new ProblemException({ ...problem.problem, detail: redactCardNumbers(detail), extensions: extensions && redactStrings(extensions) });
}

/** A JSON value with redactCardNumbers applied to each string in it, object keys included. */
function redactStrings<T>(value: T): T {
  if (typeof value === 'string') return redactCardNumbers(value) as T;
  if (Array.isArray(value)) return value.map(redactStrings) as T;
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [redactCardNumbers(k), redactStrings(v)])) as T;
}

/**
 * A request Fastify itself refused before any handler (a body over the limit,
 * a Content-Length that does not match the body, ...): its errors carry an
 * `FST_` code and a 4xx `statusCode`.
 */
function frameworkClientError(error: unknown): { statusCode: number; message: string } | undefined {
  const e = error as { code?: unknown; statusCode?: unknown; message?: unknown } | null;
  if (!(error instanceof Error) || typeof e?.code !== 'string' || !e.code.startsWith('FST_')) return undefined;
  const status = e.statusCode;
  return typeof status === 'number' && status >= 400 && status < 500 ? { statusCode: status, message: String(e.message) } : undefined;
}

function describe(error: unknown): string {
  const e = error as { code?: unknown; message?: unknown };
  return [e?.code, e?.message].filter(Boolean).join(': ');
}
