/**
 * The port to the card network. The payments service depends on this abstract
 * class; StripeCardNetwork implements it over Stripe's API (the bundled
 * simulator's, or Stripe's own). Every call carries an idempotency key of OUR
 * operation (derived from the payment's or refund's id, never the client's
 * Idempotency-Key), identical on every attempt and resume of that operation and
 * unique across clients, so the network turns any repeat into the same charge.
 *
 * Three kinds of answers, and what each lets the caller conclude:
 * - a result (charged, declined, refunded): it happened, record it;
 * - InvalidSourceError / CardNetworkRejectedError: the network said nothing was
 *   done; it is safe to forget the attempt;
 * - CardNetworkUnavailableError: unknown (timeout, dropped connection, 5xx): it
 *   may have happened; never record a failure on a guess, ask again with the same key.
 */
export interface ChargeRequest {
  amount: number;
  currency: string;
  /** A card token (`tok_visa`) or a PaymentMethod id (`pm_card_visa`). */
  source: string;
  description: string | null;
  idempotencyKey: string;
  metadata: Record<string, string>;
}

export type DeclineCode = 'card_declined' | 'insufficient_funds';

export type ChargeResult =
  | { status: 'succeeded'; chargeId: string }
  /** `chargeId`: the network's record of the declined attempt, when it made one. */
  | { status: 'declined'; declineCode: DeclineCode; chargeId: string | null };

export interface RefundRequest {
  /** The network's id of the charge (what ChargeResult returned). */
  chargeId: string;
  amount: number;
  idempotencyKey: string;
  metadata: Record<string, string>;
}

export interface RefundResult {
  refundId: string;
}

export abstract class CardNetwork {
  abstract charge(request: ChargeRequest): Promise<ChargeResult>;
  abstract refund(request: RefundRequest): Promise<RefundResult>;
}

/** The network does not know this card source: a bad request, nothing was charged. */
export class InvalidSourceError extends Error {
  override name = 'InvalidSourceError';
}

/** The network answered that it did nothing (e.g. a processing error before charging, a refused refund). */
export class CardNetworkRejectedError extends Error {
  override name = 'CardNetworkRejectedError';
}

/** No answer that says what happened (timeout, dropped connection, 5xx): the outcome is unknown. */
export class CardNetworkUnavailableError extends Error {
  override name = 'CardNetworkUnavailableError';
}
