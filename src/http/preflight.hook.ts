import type { onRequestHookHandler } from 'fastify';
import { sendProblem } from './http';
import { ProblemException } from './problem';

/**
 * An OPTIONS request (a CORS preflight, or a probe) carries no body: one that
 * announces a body (Content-Length above 0, or chunked) is answered 413 before
 * a byte of it is read, and the connection is closed, so the unread bytes are
 * never taken for a next request. Nothing reads or parses it, whatever the
 * route, with or without HTTP_CORS_ORIGINS. A Fastify onRequest hook.
 */
export const refuseOptionsBody: onRequestHookHandler = (request, reply, done) => {
  const { headers } = request;
  if (request.method !== 'OPTIONS' || (headers['transfer-encoding'] === undefined && Number(headers['content-length'] ?? 0) === 0)) return done();
  reply.header('Connection', 'close');
  sendProblem(
    reply,
    new ProblemException({ status: 413, code: 'payload_too_large', title: 'Payload Too Large', detail: 'An OPTIONS request carries no body.' }),
  );
};
