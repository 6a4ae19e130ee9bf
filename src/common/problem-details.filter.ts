import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import { isDatabaseUnavailable } from '../database/database-errors';
import { JSON_TOO_DEEP, MAX_JSON_DEPTH } from './json-depth';
import { PROBLEM_CONTENT_TYPE, ProblemException, problems } from './problem';

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
 * stable `code`. Unknown errors are 500s with no detail leaked (stack and SQL
 * go to the log with the request id); an unreachable database is a 503 with
 * Retry-After, because a retry will succeed once it is back.
 */
@Catch()
export class ProblemDetailsFilter implements ExceptionFilter {
  private readonly logger = new Logger('Errors');

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const req = http.getRequest<Request & { id?: string }>();
    const res = http.getResponse<Response>();
    const problem = this.toProblem(exception, req);

    if (res.headersSent) {
      // The response is already on its way (a replay streaming, a client gone).
      res.end();
      return;
    }
    for (const [name, value] of Object.entries(problem.headers)) res.setHeader(name, value);
    res.status(problem.problem.status).type(PROBLEM_CONTENT_TYPE).send(JSON.stringify(problem.toBody()));
  }

  private toProblem(exception: unknown, req: Request & { id?: string }): ProblemException {
    if (exception instanceof ProblemException) return exception;
    if (exception instanceof HttpException) return this.fromHttpException(exception);
    if (isDatabaseUnavailable(exception)) {
      this.logger.warn({ requestId: req.id, err: describe(exception) }, 'database unavailable');
      return problems.serviceUnavailable();
    }
    this.logger.error({ requestId: req.id, err: describeForLog(exception) }, 'unhandled error');
    return problems.internal();
  }

  private fromHttpException(exception: HttpException): ProblemException {
    const status = exception.getStatus();
    const cause = exception.cause as { type?: unknown } | undefined;
    if (status === HttpStatus.BAD_REQUEST && cause?.type === 'entity.parse.failed') {
      return new ProblemException({
        status,
        code: 'invalid_json',
        title: 'Invalid JSON',
        detail: 'The request body is not valid JSON.',
      });
    }
    if (status === HttpStatus.BAD_REQUEST && cause?.type === JSON_TOO_DEEP) {
      return new ProblemException({
        status,
        code: 'invalid_json',
        title: 'Invalid JSON',
        detail: `The request body nests deeper than ${MAX_JSON_DEPTH} levels.`,
      });
    }
    if (status === HttpStatus.PAYLOAD_TOO_LARGE) {
      return new ProblemException({
        status,
        code: 'payload_too_large',
        title: 'Payload Too Large',
        detail: 'The request body exceeds the size limit.',
      });
    }
    if (status === HttpStatus.SERVICE_UNAVAILABLE) return problems.serviceUnavailable();
    const response = exception.getResponse();
    const message =
      typeof response === 'object' && response !== null && 'message' in response
        ? String((response as { message: unknown }).message)
        : exception.message;
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
 * What a 500 logs: the error's class, code, message, constraint and stack,
 * never the whole object. A TypeORM QueryFailedError carries the SQL's
 * `parameters` and pg's `detail` ("Key (email)=(...) already exists"): client
 * data that must not reach the logs.
 */
export function describeForLog(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { class: typeof error, message: 'a non-Error value was thrown' };
  const e = error as Error & { code?: unknown; constraint?: unknown; driverError?: { code?: unknown; constraint?: unknown } };
  const code = e.code ?? e.driverError?.code;
  const constraint = e.constraint ?? e.driverError?.constraint;
  return {
    class: e.constructor?.name ?? e.name,
    message: e.message,
    ...(typeof code === 'string' || typeof code === 'number' ? { code } : {}),
    ...(typeof constraint === 'string' ? { constraint } : {}),
    stack: e.stack,
  };
}

function describe(error: unknown): string {
  const e = error as { code?: unknown; message?: unknown };
  return [e?.code, e?.message].filter(Boolean).join(': ');
}
