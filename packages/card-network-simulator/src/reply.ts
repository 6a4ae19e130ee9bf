/**
 * How an answer leaves: JSON with its Content-Length, at most once per
 * request, or lost on its way as a fault says.
 */
import type { ServerResponse } from 'node:http';
import type { Outcome } from './account';
import { ApiError } from './api';
import type { LostAnswerFault } from './faults';

/** Stripe's 500: an `error` fault's answer, and what a `saved_error` fault saves under the key. */
export const INTERNAL_ERROR = { error: { type: 'api_error', message: 'An unknown error occurred while processing your request.' } };

export function send(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.statusCode = status;
  res.end(body);
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  send(res, status, JSON.stringify(body), headers);
}

export function sendError(res: ServerResponse, e: ApiError, headers?: Record<string, string>): void {
  sendJson(res, e.status, { error: e.error }, headers);
}

/** The answer of an effect that happened, lost on its way: dropped, never sent, or a 500. */
export function loseAnswer(res: ServerResponse, fault: LostAnswerFault, headers: Record<string, string>): void {
  switch (fault) {
    case 'drop':
      res.socket?.destroy();
      return;
    case 'hang':
      return;
    case 'error':
      return sendJson(res, 500, INTERNAL_ERROR, headers);
  }
}

/** As Stripe does for answers a retry cannot change (a decline, a processing error): SDKs then do not retry. */
export function retryAdvice(outcome: Outcome): Record<string, string> {
  return outcome.status === 402 ? { 'Stripe-Should-Retry': 'false' } : {};
}
