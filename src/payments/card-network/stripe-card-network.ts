import Stripe from 'stripe';
import {
  CardNetwork,
  CardNetworkRejectedError,
  CardNetworkUnavailableError,
  ChargeRequest,
  ChargeResult,
  InvalidSourceError,
  RefundRequest,
  RefundResult,
} from './card-network';

export interface StripeSettings {
  /** The API base, e.g. https://api.stripe.com or the simulator's http://127.0.0.1:4242. */
  url: string;
  /** A secret key (sk_test_... for the simulator and Stripe's test mode). */
  apiKey: string;
  /** Per attempt; a timeout is an unknown outcome, never a decline. */
  timeoutMs: number;
  /** The SDK's own retries of network errors, 409 and 5xx, always with our idempotency key. */
  maxRetries: number;
}

/**
 * The card network over Stripe's API with the official SDK: PaymentIntents
 * confirmed at once, and Refunds. Against Stripe's test mode it needs only
 * CARD_NETWORK_URL=https://api.stripe.com and a test STRIPE_API_KEY.
 *
 * Every POST carries the idempotency key the service derived from its own
 * operation, so the SDK's retries (and ours, after a crash) reuse it and never
 * a key the SDK invents. The SDK's errors are sorted by what they prove:
 * a card error is a decline (recorded); an invalid request or a rate limit was
 * refused before anything happened; a processing error the network reports as
 * such did nothing; everything else (timeouts, dropped connections, other 5xx,
 * idempotency conflicts) leaves the outcome unknown.
 */
export class StripeCardNetwork extends CardNetwork {
  private readonly stripe: Stripe;

  constructor(settings: StripeSettings) {
    super();
    const url = new URL(settings.url);
    const protocol = url.protocol === 'http:' ? 'http' : 'https';
    this.stripe = new Stripe(settings.apiKey, {
      host: url.hostname,
      port: url.port || (protocol === 'http' ? 80 : 443),
      protocol,
      timeout: settings.timeoutMs,
      maxNetworkRetries: settings.maxRetries,
      telemetry: false,
      appInfo: { name: 'safe-retries' },
    });
  }

  async charge(request: ChargeRequest): Promise<ChargeResult> {
    try {
      const intent = await this.stripe.paymentIntents.create(
        {
          amount: request.amount,
          currency: request.currency,
          payment_method: toPaymentMethod(request.source),
          // Confirmed server-side, with no redirect-based method (no return_url needed).
          automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
          confirm: true,
          description: request.description ?? undefined,
          metadata: request.metadata,
        },
        { idempotencyKey: request.idempotencyKey },
      );
      if (intent.status === 'succeeded') return { status: 'succeeded', chargeId: intent.id };
      // Anything else (requires_action, processing, ...) is not a charge we can record as done.
      throw new CardNetworkUnavailableError(`payment intent ${intent.id} is ${intent.status}`);
    } catch (error) {
      if (error instanceof Stripe.errors.StripeCardError) {
        const declineCode = error.decline_code === 'insufficient_funds' ? 'insufficient_funds' : 'card_declined';
        return { status: 'declined', declineCode, chargeId: error.payment_intent?.id ?? null };
      }
      if (error instanceof Stripe.errors.StripeInvalidRequestError && error.param === 'payment_method') {
        throw new InvalidSourceError('the card network does not know this card source');
      }
      throw classify(error);
    }
  }

  async refund(request: RefundRequest): Promise<RefundResult> {
    try {
      const refund = await this.stripe.refunds.create(
        { payment_intent: request.chargeId, amount: request.amount, metadata: request.metadata },
        { idempotencyKey: request.idempotencyKey },
      );
      if (refund.status === 'succeeded' || refund.status === 'pending') return { refundId: refund.id };
      throw new CardNetworkRejectedError(`refund ${refund.id} is ${refund.status}`);
    } catch (error) {
      throw classify(error);
    }
  }
}

/** Stripe's test PaymentMethods have tokens of the same name: tok_visa -> pm_card_visa. */
export function toPaymentMethod(source: string): string {
  return source.startsWith('tok_') ? `pm_card_${source.slice(4)}` : source;
}

function classify(error: unknown): Error {
  if (error instanceof CardNetworkRejectedError || error instanceof CardNetworkUnavailableError) return error;
  if (
    error instanceof Stripe.errors.StripeInvalidRequestError ||
    error instanceof Stripe.errors.StripeRateLimitError ||
    error instanceof Stripe.errors.StripeAuthenticationError ||
    error instanceof Stripe.errors.StripePermissionError ||
    (error instanceof Stripe.errors.StripeAPIError && error.code === 'processing_error')
  ) {
    return new CardNetworkRejectedError(`the card network refused the request: ${error.message}`);
  }
  if (error instanceof Stripe.errors.StripeError) {
    return new CardNetworkUnavailableError(`no definite answer from the card network: ${error.message}`);
  }
  return error instanceof Error ? error : new Error(String(error));
}
