/**
 * The port to the card network. The payments service depends on this abstract
 * class; StripeCardNetwork implements it over Stripe's API (the bundled
 * simulator's, or Stripe's own).
 *
 * A payment is two calls, so that money can only move on an object whose id we
 * have recorded first:
 *   createIntent  -> an UNCONFIRMED PaymentIntent: it charges nothing, ever, by
 *                    itself. Repeating it (same key, or a new one past the
 *                    network's key window) at worst leaves a stray unconfirmed
 *                    intent, never a charge.
 *   confirmIntent -> the charge, on the intent whose id the service recorded.
 *   retrieveIntent-> what the network says about that intent now: a resume of
 *                    any age asks this instead of sending anything again.
 * A refund is one call; `findRefund` looks it up among the payment's refunds by
 * our metadata, which is the proof that a refund was, or was not, made.
 *
 * An answer speaks only for the call it answers. The only errors that let the
 * service conclude something are:
 * - InvalidSourceError on createIntent: the source is unknown (no intent was
 *   confirmed, so nothing was charged, whatever happened before);
 * - CardNetworkRefusedError: this call was refused before it did anything
 *   (a 4xx that is not a card error). It says nothing about earlier calls; the
 *   service must look the operation up before it concludes "nothing happened".
 * Everything else is CardNetworkUnavailableError: the outcome of this call is
 * unknown.
 */
export interface IntentRequest {
  amount: number;
  currency: string;
  /** A card token (`tok_visa`) or a PaymentMethod id (`pm_card_visa`). */
  source: string;
  description: string | null;
  idempotencyKey: string;
  metadata: Record<string, string>;
}

/** Why an intent ended without a charge. */
export const CHARGE_FAILURES = ['card_declined', 'insufficient_funds', 'authentication_required', 'processing_error', 'canceled'] as const;
export type ChargeFailure = (typeof CHARGE_FAILURES)[number];

/** What the network says about one PaymentIntent. */
export type IntentState =
  | { status: 'succeeded' }
  /** Created, never confirmed: nothing charged yet. */
  | { status: 'requires_confirmation' }
  /** The network is still working on the charge: wait (webhook, a later resume). */
  | { status: 'processing' }
  /** Not charged, and it will not be unless someone confirms it again (we never do). */
  | { status: 'failed'; failure: ChargeFailure };

export interface RefundRequest {
  /** The network's id of the payment (the PaymentIntent). */
  intentId: string;
  amount: number;
  idempotencyKey: string;
  metadata: Record<string, string>;
}

export type RefundState = { status: 'succeeded' | 'pending' | 'failed'; refundId: string };

/** A webhook event of the network, verified, in the terms of this port. */
export type NetworkEvent = { id: string; type: string; metadata: Record<string, string> } & (
  | { object: 'payment_intent'; intentId: string; state: IntentState }
  | { object: 'refund'; intentId: string; state: RefundState }
  | { object: 'other' }
);

export abstract class CardNetwork {
  abstract createIntent(request: IntentRequest): Promise<string>;
  abstract confirmIntent(intentId: string, idempotencyKey: string): Promise<IntentState>;
  abstract retrieveIntent(intentId: string): Promise<IntentState>;
  abstract createRefund(request: RefundRequest): Promise<RefundState>;
  /** Our refund among the intent's refunds (matched on `metadata[key] = value`), or null when the network has none. */
  abstract findRefund(intentId: string, match: { key: string; value: string }): Promise<RefundState | null>;
  /** Verifies a webhook's signature (and its age) on the exact bytes received; InvalidWebhookError otherwise. */
  abstract parseWebhook(payload: Buffer, signature: string): NetworkEvent;
}

/** A webhook whose signature is missing, forged or too old: nothing in it may be believed. */
export class InvalidWebhookError extends Error {
  override name = 'InvalidWebhookError';
}

/** The network does not know this card source: nothing was charged. */
export class InvalidSourceError extends Error {
  override name = 'InvalidSourceError';
}

/** The network refused this call before doing anything (401, 403, 429, 400 other than a card error). */
export class CardNetworkRefusedError extends Error {
  override name = 'CardNetworkRefusedError';
}

/** No answer that says what this call did (timeout, dropped connection, 5xx, idempotency conflict). */
export class CardNetworkUnavailableError extends Error {
  override name = 'CardNetworkUnavailableError';
}
