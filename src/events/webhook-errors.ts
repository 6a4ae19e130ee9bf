import { RefusedAddressError } from '../addresses/public-address';
import { AttemptTimeoutError } from './webhook-request';

/** What kept an attempt from an answer, in a word a client can act on. */
export type AttemptErrorClass =
  | 'refused_address'
  | 'dns'
  | 'connection_refused'
  | 'connection_reset'
  | 'connect_timeout'
  | 'response_timeout'
  | 'tls'
  | 'aborted'
  | 'network'
  | 'http_status';

/** Node's error codes, by class; anything else is `network`. */
const CODES: Record<string, AttemptErrorClass> = {
  ENOTFOUND: 'dns',
  EAI_AGAIN: 'dns',
  ENODATA: 'dns',
  ECONNREFUSED: 'connection_refused',
  ECONNRESET: 'connection_reset',
  EPIPE: 'connection_reset',
  ETIMEDOUT: 'connect_timeout',
  ENETUNREACH: 'connection_refused',
  EHOSTUNREACH: 'connection_refused',
  ABORT_ERR: 'aborted',
};

export function errorClass(error: unknown): AttemptErrorClass {
  if (error instanceof RefusedAddressError) return 'refused_address';
  if (error instanceof AttemptTimeoutError) return error.phase === 'dns' ? 'dns' : error.phase === 'connect' ? 'connect_timeout' : 'response_timeout';
  const { code, name, syscall } = error as { code?: string; name?: string; syscall?: string };
  if (name === 'AbortError' || name === 'TimeoutError') return 'aborted';
  // A DNS query's error (HostResolver: queryA, queryAaaa), whatever its code (ETIMEOUT, ESERVFAIL, ECONNREFUSED…).
  if (syscall?.startsWith('query')) return 'dns';
  if (code?.startsWith('ERR_TLS') || code?.includes('CERT') || code?.startsWith('ERR_SSL')) return 'tls';
  return (code && CODES[code]) || 'network';
}

/**
 * A delivery to try again later. `retryAfterMs`, when known, is how long
 * until the message's next turn (its step of the retry schedule, its
 * endpoint's pause end): the outbox's relay hands the message over again
 * then, not before (OutboxPublisher). Unknown (the schedule over, the
 * endpoint disabled), the relay's backoff decides.
 */
export class DeliveryRetryError extends Error {
  override name = 'DeliveryRetryError';

  constructor(
    message: string,
    readonly retryAfterMs: number | undefined,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * A delivery the publisher holds without sending (the message's next attempt
 * is not due, its schedule is over, or its endpoint is paused or disabled):
 * the outbox counts it as failed and hands the message over again at its
 * next turn, and no attempt is made or recorded. Cheap: a statement or two,
 * no request.
 */
export class DeliveryHeldError extends DeliveryRetryError {
  override name = 'DeliveryHeldError';
}
