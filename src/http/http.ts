import type { ServerResponse } from 'node:http';
import type { ProblemException } from './problem';
import { PROBLEM_CONTENT_TYPE } from './problem';

/** The reply of a route on Fastify: what the exception filter and the controllers use of it. */
export interface FastifyLikeReply {
  raw: ServerResponse;
  code(status: number): FastifyLikeReply;
  header(name: string, value: string): FastifyLikeReply;
  send(body: string): unknown;
}

/** A route's response on either platform: a Fastify reply, or a Node response (Express's, or a raw one). */
export type AnyResponse = FastifyLikeReply | ServerResponse;

export function isFastifyReply(res: AnyResponse): res is FastifyLikeReply {
  return typeof (res as Partial<FastifyLikeReply>).code === 'function' && 'raw' in res;
}

/** The Node response under either platform's. */
export function nodeResponse(res: AnyResponse): ServerResponse {
  return isFastifyReply(res) ? res.raw : res;
}

export const PROBLEM_CONTENT_TYPE_UTF8 = `${PROBLEM_CONTENT_TYPE}; charset=utf-8`;

/**
 * Sends a problem+json answer. A Fastify reply sends it itself (so its hooks,
 * metrics included, see it); a Node response (what middleware has) is ended directly.
 */
export function sendProblem(res: AnyResponse, problem: ProblemException): void {
  const body = JSON.stringify(problem.toBody());
  const status = problem.problem.status;
  if (isFastifyReply(res)) {
    res.code(status);
    for (const [name, value] of Object.entries(problem.headers)) res.header(name, value);
    res.header('Content-Type', PROBLEM_CONTENT_TYPE_UTF8).send(body);
    return;
  }
  res.statusCode = status;
  for (const [name, value] of Object.entries(problem.headers)) res.setHeader(name, value);
  res.setHeader('Content-Type', PROBLEM_CONTENT_TYPE_UTF8);
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

/** What a handler with `@Res({ passthrough: true })` may use: `header()` is on a Fastify reply and an Express response alike. */
export interface ResponseHeaders {
  header(name: string, value: string): unknown;
}
