/**
 * A finished attempt's response as the caller gets it: a ClientResponse for a
 * 2xx, a ProblemError for anything else the client stops at.
 */
import type { ResponseOutcome } from './attempt';
import type { ClientResponse } from './client-options';
import { INVALID_RESPONSE_CODE, ProblemError, UNKNOWN_PROBLEM_CODE } from './errors';
import type { PreparedRequest } from './prepared-request';

function isJson(headers: Headers): boolean {
  const mediaType = (headers.get('Content-Type') ?? '').split(';')[0].trim().toLowerCase();
  return mediaType === 'application/json' || mediaType.endsWith('+json');
}

/** `{ ok: false }` when the body claims to be JSON and is not. */
function parseBody(outcome: ResponseOutcome): { ok: true; value: unknown } | { ok: false } {
  if (outcome.text === '') return { ok: true, value: undefined };
  if (!isJson(outcome.headers)) return { ok: true, value: outcome.text };
  try {
    return { ok: true, value: JSON.parse(outcome.text) as unknown };
  } catch {
    return { ok: false };
  }
}

export function toClientResponse<T>(outcome: ResponseOutcome, attempts: number, request: PreparedRequest): ClientResponse<T> {
  const parsed = parseBody(outcome);
  if (!parsed.ok) {
    // The operation succeeded but we cannot read its result; a retry would replay
    // the same bytes, so report it, with the status, rather than loop.
    throw new ProblemError({
      type: 'about:blank',
      title: 'Invalid Response',
      status: outcome.status,
      detail: 'The response claims to be JSON but could not be parsed.',
      code: INVALID_RESPONSE_CODE,
      body: outcome.text,
      headers: outcome.headers,
      attempts,
      idempotencyKey: request.idempotencyKey,
    });
  }
  return {
    status: outcome.status,
    body: parsed.value as T,
    headers: outcome.headers,
    replayed: outcome.headers.get('Idempotent-Replayed')?.trim().toLowerCase() === 'true',
    attempts,
  };
}

export function toProblemError(outcome: ResponseOutcome, attempts: number, request: PreparedRequest): ProblemError {
  const parsed = parseBody(outcome);
  const body = parsed.ok ? parsed.value : outcome.text;
  const problem: Record<string, unknown> = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  const text = (field: string): string | undefined => (typeof problem[field] === 'string' ? (problem[field] as string) : undefined);
  return new ProblemError({
    type: text('type') ?? 'about:blank',
    title: text('title') ?? (outcome.statusText || `HTTP ${outcome.status}`),
    status: outcome.status,
    detail: text('detail'),
    code: text('code') ?? UNKNOWN_PROBLEM_CODE,
    body,
    headers: outcome.headers,
    attempts,
    idempotencyKey: request.idempotencyKey,
  });
}
