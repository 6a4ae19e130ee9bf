import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Level, Logger } from 'pino';

/**
 * The level of a finished request's line: 5xx are errors, other 4xx warnings,
 * the rest info. 401 and 429 write no line (a flood would flood the log):
 * FailedAuthLimiter warns once a minute per address.
 */
export function requestLogLevel(statusCode: number): Level | 'silent' {
  if (statusCode >= 500) return 'error';
  if (statusCode === 401 || statusCode === 429) return 'silent';
  return statusCode >= 400 ? 'warn' : 'info';
}

/**
 * One JSON line per finished request, with its id, method, url, headers
 * (authorization and cookie censored by ROOT_LOGGER), status, response headers
 * and time. A Fastify `onResponse` hook: it sees every request, answered by a
 * route, a middleware or Fastify itself, and Fastify times it. When the level
 * drops the line (a 2xx at warn) it compares two numbers and returns: nothing
 * is built, no listener added, no logger made.
 */
export function logRequests(fastify: FastifyInstance, logger: Logger): void {
  fastify.addHook('onResponse', (request, reply, done) => {
    writeRequestLine(logger, request, reply);
    done();
  });
  // A request the client abandons never finishes (no onResponse): its line is written when the
  // connection closes. Its status is then still the route's own (200, or 201 for a POST): an info
  // line, so the listener this needs per request is added only where info is written.
  if (logger.isLevelEnabled('info')) {
    fastify.addHook('onRequest', (request, reply, done) => {
      reply.raw.once('close', () => {
        if (!reply.raw.writableFinished) writeRequestLine(logger, request, reply);
      });
      done();
    });
  }
}

function writeRequestLine(logger: Logger, request: FastifyRequest, reply: FastifyReply): void {
  const { statusCode } = reply;
  const level = requestLogLevel(statusCode);
  if (level === 'silent' || !logger.isLevelEnabled(level)) return;
  const res = reply.raw;
  const line: Record<string, unknown> = {
    reqId: request.id,
    req: {
      id: request.id,
      method: request.method,
      url: request.url,
      query: request.query,
      headers: request.headers,
      remoteAddress: request.socket.remoteAddress,
      remotePort: request.socket.remotePort,
    },
    res: { statusCode, headers: res.getHeaders() },
  };
  if (statusCode >= 500) line.err = new Error(`failed with status code ${statusCode}`);
  line.responseTime = Math.round(reply.elapsedTime);
  const message = statusCode >= 500 ? 'request errored' : request.raw.readableAborted || !res.writableFinished ? 'request aborted' : 'request completed';
  logger[level](line, message);
}
