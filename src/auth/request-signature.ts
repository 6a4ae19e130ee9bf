import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyRequest } from 'fastify';

/**
 * The credential of a `signed` route (the card network's webhooks): a
 * signature over the request's exact body, which only the holder of the secret
 * can check. Authentication decides when it is checked (once the body has
 * arrived, before anything parses it) and what a failure costs
 * (WebhookSignatureLimiter); the feature that holds the secret binds this
 * contract (payments' CardNetworkSignature), so auth holds no secret and knows
 * no signature format.
 */
export abstract class RequestSignature {
  /** Whether the headers carry a signature of the expected form (before the body: whether it verifies is not known yet). */
  abstract looksSigned(headers: IncomingHttpHeaders): boolean;

  /**
   * Verifies the signature over the request's raw body (`request.rawBody`)
   * and keeps what it signed on the request. InvalidSignatureError when the
   * signature is missing, forged or too old; any other error is answered as it
   * is (a ProblemException: signed bytes the route cannot take).
   */
  abstract verify(request: FastifyRequest): void;
}

/** A signature that is missing, forged or too old: nothing in the request may be believed. Its message says why, to the sender. */
export class InvalidSignatureError extends Error {
  override name = 'InvalidSignatureError';
}
