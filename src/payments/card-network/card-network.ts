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
 *   cancelIntent  -> an intent that must never charge (a payment failed by an
 *                    operator, or released) is canceled, so that nobody can
 *                    confirm it later; an intent that is no longer cancelable
 *                    is answered with its state, the network's word on it.
 * A refund is one call; `findRefund` looks it up among the payment's refunds by
 * our metadata, which is the proof that a refund was, or was not, made.
 *
 * An answer speaks only for the call it answers. The only errors that let the
 * service conclude something are:
 * - InvalidParameterError on createIntent: the network refuses a parameter of
 *   the payment (the source, the amount, the currency); no intent was ever
 *   confirmed, so nothing was charged, whatever happened before;
 * - CardNetworkRefusedError: this send was refused before it did anything
 *   (a 4xx that is not a card error); `firstSend` says whether it answered the
 *   call's first send (a resend's refusal says nothing of the first send). It
 *   says nothing about earlier calls;
 * - UnknownNetworkObjectError on a retrieve: the network does not know the
 *   object (404): wrong account or key, never "not charged".
 * Everything else is CardNetworkUnavailableError: the outcome of this call is
 * unknown.
 */
export interface IntentRequest {
  amount: number;
  currency: string;
  /** A card token (`tok_visa`, `tok_1N3T...`) or a PaymentMethod id (`pm_card_visa`). */
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

/** What the network says about one refund: `intentId` is the PaymentIntent it refunds, `metadata` ours. */
export type RefundState = {
  status: 'succeeded' | 'pending' | 'failed';
  refundId: string;
  intentId: string;
  amount: number;
  metadata: Record<string, string>;
  /** Why it failed (the network's `failure_reason`), when it did. */
  failureReason?: string;
};

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
  /**
   * Cancels the intent: `failed` (`canceled`) once it is canceled, now or
   * before. An intent that can no longer be canceled (it succeeded, or is
   * processing) is not an error: its state is answered, as the network's refusal
   * reports it. A 404 is UnknownNetworkObjectError, like a retrieve.
   */
  abstract cancelIntent(intentId: string, idempotencyKey: string): Promise<IntentState>;
  abstract createRefund(request: RefundRequest): Promise<RefundState>;
  abstract retrieveRefund(refundId: string): Promise<RefundState>;
  /** Our refund among the intent's refunds (matched on `metadata[key] = value`), or null when the network has none. */
  abstract findRefund(intentId: string, match: { key: string; value: string }): Promise<RefundState | null>;
  /**
   * Verifies a webhook's signature (and its age) on the exact bytes received;
   * InvalidWebhookError otherwise, and MalformedWebhookError when the signed
   * bytes are not an event.
   */
  abstract parseWebhook(payload: Buffer, signature: string): NetworkEvent;
}

/** A webhook whose signature is missing, forged or too old: nothing in it may be believed. */
export class InvalidWebhookError extends Error {
  override name = 'InvalidWebhookError';
}

/** A webhook whose signature verifies but whose body is not an event (not JSON, or no id, type or data.object). */
export class MalformedWebhookError extends Error {
  override name = 'MalformedWebhookError';
}

/**
 * The network refuses a parameter of the payment: `param` is which one in our
 * terms (`source`, `amount`, `currency`), `message` the network's reason.
 */
export class InvalidParameterError extends Error {
  override name = 'InvalidParameterError';
  constructor(
    readonly param: 'source' | 'amount' | 'currency',
    message: string,
  ) {
    super(message);
  }
}

/** A retrieve of an object the network does not know (404): it cannot tell us anything about it. */
export class UnknownNetworkObjectError extends Error {
  override name = 'UnknownNetworkObjectError';
}

/**
 * The network refused this send before doing anything (401, 403, 429, 400 other
 * than a card error). `firstSend`: the refusal answered the call's first send
 * (createRefund sends once before it resends); false when it answered a resend,
 * whose first send may have acted. `definitive`: a 400, the network's verdict
 * on the request as it stands (the same request is refused again); a 401, 403
 * or 429 is about the caller (a key, a permission, a rate) and may pass.
 */
export class CardNetworkRefusedError extends Error {
  override name = 'CardNetworkRefusedError';
  readonly firstSend: boolean;
  readonly definitive: boolean;
  constructor(message: string, options: { firstSend?: boolean; definitive?: boolean } = {}) {
    super(message);
    this.firstSend = options.firstSend ?? true;
    this.definitive = options.definitive ?? false;
  }
}

/** No answer that says what this call did (timeout, dropped connection, 5xx, idempotency conflict). */
export class CardNetworkUnavailableError extends Error {
  override name = 'CardNetworkUnavailableError';
}
