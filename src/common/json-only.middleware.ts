import { Injectable, NestMiddleware } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import { ProblemException } from './problem';

const WITH_BODY = new Set(['POST', 'PUT', 'PATCH']);

/**
 * A body that is not JSON is refused with 415 before it can reach a handler
 * (express's JSON parser would otherwise skip it and the handler would see {}).
 */
@Injectable()
export class JsonOnlyMiddleware implements NestMiddleware {
  use(req: Request, _res: Response, next: NextFunction): void {
    const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
    if (WITH_BODY.has(req.method) && hasBody && !req.is('application/json')) {
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
