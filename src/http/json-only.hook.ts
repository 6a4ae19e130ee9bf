import type { onRequestHookHandler } from 'fastify';
import { sendProblem } from './http';
import { ProblemException } from './problem';

const WITH_BODY = new Set(['POST', 'PUT', 'PATCH']);

/**
 * A body that is not JSON is refused with 415 before it can reach a handler
 * (the JSON body parser would otherwise skip it and the handler would see no body).
 * A Fastify onRequest hook: it runs before the body is read.
 */
export const rejectNonJsonBody: onRequestHookHandler = (request, reply, done) => {
  const { headers } = request;
  const hasBody = headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0;
  if (!WITH_BODY.has(request.method) || !hasBody || isJson(headers['content-type'])) return done();
  sendProblem(
    reply,
    new ProblemException({ status: 415, code: 'unsupported_media_type', title: 'Unsupported Media Type', detail: 'Send the request body as application/json.' }),
  );
};

/** Whether a Content-Type names application/json, parameters (charset) aside. */
function isJson(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const semicolon = contentType.indexOf(';');
  return (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase() === 'application/json';
}
