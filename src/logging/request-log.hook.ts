import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Level, Logger } from 'pino';
import { redactCardNumbers } from '../card-numbers/card-number';
import { ClientErrorDigest } from './client-error-digest';
import { describeForLog } from './describe-error';

declare module 'fastify' {
  interface FastifyRequest {
    /** The exception behind the request's 5xx answer, for its request line (recordRequestError). */
    failure: unknown;
  }
}

/**
 * The request headers a request line shows; every other header is left out,
 * so a header that carries a secret (Authorization, Cookie, a webhook's
 * signature, a header a proxy adds tomorrow) never reaches the log, without
 * anyone having to name it. Idempotency-Key is shown: it is the handle a client
 * and support share for one operation and its retries, and it grants nothing
 * without the client's API key (keys are scoped per client). Each value is cut
 * to MAX_LOGGED_CHARS.
 */
export const LOGGED_REQUEST_HEADERS = [
  'host',
  'user-agent',
  'accept',
  'content-type',
  'content-length',
  'x-request-id',
  'x-forwarded-for',
  'idempotency-key',
] as const;

/**
 * The longest URL or header value a request line shows; a longer one is cut
 * there and marked with its length (`…(8000 chars)`). With the allow-list,
 * this bounds a request line to about 3 KB whatever the request.
 */
export const MAX_LOGGED_CHARS = 256;

/**
 * The level of a finished request's line: 5xx are errors, other 4xx warnings,
 * the rest info. 401 and 429 write no line (a flood would flood the log):
 * FailedAuthLimiter sums them up once a minute.
 */
export function requestLogLevel(statusCode: number): Level | 'silent' {
  if (statusCode >= 500) return 'error';
  if (statusCode === 401 || statusCode === 429) return 'silent';
  return statusCode >= 400 ? 'warn' : 'info';
}

/**
 * Keeps the exception a request failed with for its request line (the
 * exception filter calls it for every 5xx it answers), so the line's `err` is
 * what was thrown, where it was thrown. A Fastify request decoration
 * (logRequests declares it), no field of Fastify's own.
 */
export function recordRequestError(request: object, error: unknown): void {
  (request as FastifyRequest).failure = error;
}

/**
 * One JSON line per finished request, with its id, method, URL (query
 * included), the headers of LOGGED_REQUEST_HEADERS, each cut to
 * MAX_LOGGED_CHARS, card numbers redacted from them all, status and time; no response header. A 5xx's line has,
 * as `err`, the class, message and stack of the exception it failed with (see
 * recordRequestError), and no `err` when no exception caused it. The 4xx
 * answers to requests without an API client are summed up per address and
 * minute (ClientErrorDigest): the first one's line, then one line with the
 * count. A Fastify `onResponse` hook: it sees every request, answered by a
 * route, a middleware or Fastify itself, and Fastify times it. When the level
 * drops the line (a 2xx at warn) it compares two numbers and returns: nothing
 * is built, no listener added, no logger made.
 */
export function logRequests(fastify: FastifyInstance, logger: Logger): void {
  const digest = new ClientErrorDigest(logger);
  fastify.decorateRequest('failure', undefined);
  fastify.addHook('onResponse', (request, reply, done) => {
    writeRequestLine(logger, digest, request, reply);
    done();
  });
  // A request the client abandons never finishes (no onResponse): its line is written when the
  // connection closes. Its status is then still the route's own (200, or 201 for a POST): an info
  // line, so the listener this needs per request is added only where info is written.
  if (logger.isLevelEnabled('info')) {
    fastify.addHook('onRequest', (request, reply, done) => {
      reply.raw.once('close', () => {
        if (!reply.raw.writableFinished) writeRequestLine(logger, digest, request, reply);
      });
      done();
    });
  }
  fastify.addHook('onClose', (_instance, done) => {
    digest.flush();
    done();
  });
}

/** A value of at most MAX_LOGGED_CHARS characters, any card number in it redacted first (a cut could keep part of one). */
function bounded(value: string): string {
  const shown = redactCardNumbers(value);
  return shown.length <= MAX_LOGGED_CHARS ? shown : `${shown.slice(0, MAX_LOGGED_CHARS)}…(${shown.length} chars)`;
}

/**
 * The URL of a request line: as sent, or, when its path or query holds a card
 * number once percent-decoded (`%34%32...` is `42...`), decoded with the number
 * redacted.
 */
function loggedUrl(url: string): string {
  let decoded = url;
  try {
    decoded = decodeURIComponent(url.replaceAll('+', ' '));
  } catch {
    // A malformed escape: the URL is looked at as sent.
  }
  const redacted = redactCardNumbers(decoded);
  return bounded(redacted === decoded ? url : redacted);
}

function loggedHeaders(request: FastifyRequest): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of LOGGED_REQUEST_HEADERS) {
    const value = request.headers[name];
    if (value !== undefined) headers[name] = bounded(Array.isArray(value) ? value.join(', ') : value);
  }
  return headers;
}

function writeRequestLine(logger: Logger, digest: ClientErrorDigest, request: FastifyRequest, reply: FastifyReply): void {
  const { statusCode } = reply;
  const level = requestLogLevel(statusCode);
  if (level === 'silent' || !logger.isLevelEnabled(level)) return;
  if (statusCode >= 400 && statusCode < 500 && request.client === undefined && !digest.admit(request.ip, statusCode)) return;
  const res = reply.raw;
  const line: Record<string, unknown> = {
    reqId: request.id,
    req: {
      id: request.id,
      method: request.method,
      url: loggedUrl(request.url),
      headers: loggedHeaders(request),
      remoteAddress: request.socket.remoteAddress,
      remotePort: request.socket.remotePort,
    },
    res: { statusCode },
  };
  // describeForLog: the error's class, code, message and stack, never its data (SQL parameters, pg's detail).
  if (statusCode >= 500 && request.failure !== undefined) line.err = describeForLog(request.failure);
  line.responseTime = Math.round(reply.elapsedTime);
  const message = statusCode >= 500 ? 'request errored' : request.raw.readableAborted || !res.writableFinished ? 'request aborted' : 'request completed';
  logger[level](line, message);
}
