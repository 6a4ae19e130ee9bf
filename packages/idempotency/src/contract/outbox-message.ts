/** A message as the publisher receives it. */
export interface OutboxMessage {
  /** The message's identity: the same on every delivery. Send it as the downstream idempotency key (`webhook-id`, `Nats-Msg-Id`, `Idempotency-Key`). */
  id: string;
  topic: string;
  /** The JSON value given to `Outbox.add`. */
  payload: unknown;
  /** The stream it was added to, or null. */
  stream: string | null;
  /** 1 on the first delivery, then counting (from 1 again after a replay). */
  attempt: number;
}

/**
 * Hands a message to the world (a broker, a webhook, a mail API). Resolving
 * means delivered; throwing (or rejecting) means try again later: after the
 * relay's backoff, or, when the error carries `retryAfterMs` (a finite number
 * of milliseconds, at least 0: a receiver's Retry-After, the publisher's own
 * schedule), that long from now on the database's clock. Either way a wait
 * that ends past the horizon makes the message a dead letter. `signal`
 * aborts when the relay's lease on the message ends: another relay may then
 * deliver it too, so stop (pass it to `fetch`) rather than go on, and end
 * the attempt (record it, close what it opened). The relay waits one more
 * lease for the answer: past it the delivery fails, and its slot frees.
 */
export interface OutboxPublisher {
  (message: OutboxMessage, signal: AbortSignal): Promise<unknown>;
  /** Called once at shutdown, after the last delivery ended: closes what the publisher opened (a connection). */
  close?(): Promise<void>;
}

/** A message parked past its horizon (`Outbox.deadLetters`). */
export interface DeadLetter {
  id: string;
  topic: string;
  payload: unknown;
  stream: string | null;
  attempts: number;
  lastError: string | null;
  /** ISO 8601, UTC, to the microsecond, as the database holds it. */
  createdAt: string;
  deadAt: string;
}
