import { Injectable, NestMiddleware } from '@nestjs/common';
import type { HttpRequest, Next } from './http';
import { ProblemException } from './problem';

const WITH_BODY = new Set(['POST', 'PUT', 'PATCH']);

/**
 * A body that is not JSON is refused with 415 before it can reach a handler
 * (the JSON body parser would otherwise skip it and the handler would see no body).
 * Runs before the body is read.
 */
@Injectable()
export class JsonOnlyMiddleware implements NestMiddleware {
  use(req: HttpRequest, _res: unknown, next: Next): void {
    const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
    if (WITH_BODY.has(req.method ?? '') && hasBody && !isJson(req.headers['content-type'])) {
      throw new ProblemException({
        status: 415,
        code: 'unsupported_media_type',
        title: 'Unsupported Media Type',
        detail: 'Send the request body as application/json.',
      });
    }
    next();
  }
}

/** Whether a Content-Type names application/json, parameters (charset) aside. */
export function isJson(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const semicolon = contentType.indexOf(';');
  return (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase() === 'application/json';
}
