import Stripe from 'stripe';
import {
  CardNetwork,
  CardNetworkRefusedError,
  CardNetworkUnavailableError,
  IntentRequest,
  IntentState,
  InvalidParameterError,
  InvalidWebhookError,
  MalformedWebhookError,
  NetworkEvent,
  RefundRequest,
  RefundState,
  UnknownNetworkObjectError,
} from './card-network';
import { failureOf, intentState, paymentParam, refundState } from './stripe-objects';
import { CARD_TOKEN } from './stripe-rules';

export interface StripeSettings {
  /** The API base, e.g. https://api.stripe.com or the simulator's http://127.0.0.1:4242. */
  url: string;
  /** A secret key (sk_test_... for the simulator and Stripe's test mode). */
  apiKey: string;
  /** Per attempt; a timeout is an unknown outcome, never a decline. */
  timeoutMs: number;
  /** The SDK's own retries of network errors, 409 and 5xx, always with our idempotency key. */
  maxRetries: number;
  /** The signing secrets of the network's webhooks (whsec_...): an event signed with any of them verifies. */
  webhookSecrets: readonly string[];
}

/** Stripe's default: a signature older than this is refused (a replayed delivery). */
const WEBHOOK_TOLERANCE_S = 300;

/**
 * The card network over Stripe's API with the official SDK: PaymentIntents
 * created unconfirmed, then confirmed server-side with
 * `error_on_requires_action` (a card that needs its holder to authenticate
 * fails at once instead of waiting for a customer who is not there), and
 * Refunds. Against Stripe's test mode it needs only
 * CARD_NETWORK_URL=https://api.stripe.com and a test CARD_NETWORK_SECRET.
 *
 * Every POST carries the idempotency key the service derived from its own
 * operation, so the SDK's resends reuse it. Errors are sorted by what they say
 * about THIS call only (see CardNetwork): a card error is the network's verdict
 * on the intent; a 4xx refusal did nothing in this call; anything else is unknown.
 * The sends of a refund are counted through the SDK's documented `request`
 * event, so that a refusal is known to answer the first send only when there
 * was no resend (a resend's refusal says nothing of what the first send did).
 */
export class StripeCardNetwork extends CardNetwork {
  private readonly stripe: Stripe;
  private readonly webhookSecrets: readonly string[];

  /** HTTP sends per idempotency key, of the refunds being created now (see createRefund). */
  private readonly sends = new Map<string, number>();

  constructor(settings: StripeSettings) {
    super();
    if (settings.webhookSecrets.length === 0) throw new Error('StripeCardNetwork: at least one webhook secret is needed');
    this.webhookSecrets = settings.webhookSecrets;
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
    this.stripe.on('request', (event: Stripe.RequestEvent) => {
      const key = event.idempotency_key;
      if (key !== undefined && this.sends.has(key)) this.sends.set(key, this.sends.get(key)! + 1);
    });
  }

  async createIntent(request: IntentRequest): Promise<string> {
    try {
      const intent = await this.stripe.paymentIntents.create(
        {
          amount: request.amount,
          currency: request.currency,
          ...paymentSource(request.source),
          // Confirmed server-side, with no redirect-based method (no return_url needed).
          automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
          description: request.description ?? undefined,
          metadata: request.metadata,
        },
        { idempotencyKey: request.idempotencyKey },
      );
      return intent.id;
    } catch (error) {
      const param = error instanceof Stripe.errors.StripeInvalidRequestError ? paymentParam(error.param) : undefined;
      if (param) throw new InvalidParameterError(param, (error as Error).message);
      throw classify(error);
    }
  }

  async confirmIntent(intentId: string, idempotencyKey: string): Promise<IntentState> {
    try {
      const intent = await this.stripe.paymentIntents.confirm(intentId, { error_on_requires_action: true }, { idempotencyKey });
      return intentState(intent);
    } catch (error) {
      // The network's verdict on this intent: it was not charged.
      if (error instanceof Stripe.errors.StripeCardError) return { status: 'failed', failure: failureOf(error.code, error.decline_code) };
      throw classify(error);
    }
  }

  async retrieveIntent(intentId: string): Promise<IntentState> {
    try {
      return intentState(await this.stripe.paymentIntents.retrieve(intentId));
    } catch (error) {
      throw classifyRetrieve(error, `payment intent ${intentId}`);
    }
  }

  async cancelIntent(intentId: string, idempotencyKey: string): Promise<IntentState> {
    try {
      return intentState(await this.stripe.paymentIntents.cancel(intentId, { cancellation_reason: 'abandoned' }, { idempotencyKey }));
    } catch (error) {
      // No longer cancelable: Stripe's refusal carries the intent as the network holds it now.
      if (error instanceof Stripe.errors.StripeInvalidRequestError && error.code === 'payment_intent_unexpected_state' && error.payment_intent) {
        return intentState(error.payment_intent);
      }
      throw classifyRetrieve(error, `payment intent ${intentId}`);
    }
  }

  async createRefund(request: RefundRequest): Promise<RefundState> {
    const key = request.idempotencyKey;
    // Another send of this key in flight here already: no refusal can then speak for the first send.
    this.sends.set(key, this.sends.has(key) ? Infinity : 0);
    try {
      const refund = await this.stripe.refunds.create(
        { payment_intent: request.intentId, amount: request.amount, metadata: request.metadata },
        { idempotencyKey: key },
      );
      return refundState(refund);
    } catch (error) {
      const classified = classify(error);
      // A refusal speaks for the first send only if there was no other: the SDK resends
      // errors it judges transient (a reset connection even with no retries configured).
      if (classified instanceof CardNetworkRefusedError && this.sends.get(key) !== 1) {
        throw new CardNetworkRefusedError(classified.message, { firstSend: false, definitive: classified.definitive });
      }
      throw classified;
    } finally {
      this.sends.delete(key);
    }
  }

  async retrieveRefund(refundId: string): Promise<RefundState> {
    try {
      return refundState(await this.stripe.refunds.retrieve(refundId));
    } catch (error) {
      throw classifyRetrieve(error, `refund ${refundId}`);
    }
  }

  async findRefund(intentId: string, match: { key: string; value: string }): Promise<RefundState | null> {
    try {
      for await (const refund of this.stripe.refunds.list({ payment_intent: intentId, limit: 100 })) {
        if (refund.metadata?.[match.key] === match.value) return refundState(refund);
      }
      return null;
    } catch (error) {
      throw classify(error);
    }
  }

  parseWebhook(payload: Buffer, signature: string): NetworkEvent {
    const event = this.verifiedEvent(payload, signature);
    if (!isEvent(event)) throw new MalformedWebhookError('The signed body is not an event: an object with a string id and type, and data.object.');
    const object = event.data.object as { object?: string; id?: string; metadata?: Record<string, string> | null };
    const base = { id: event.id, type: event.type, metadata: object.metadata ?? {} };
    if (object.object === 'payment_intent' && event.type.startsWith('payment_intent.')) {
      const intent = object as Stripe.PaymentIntent;
      return { ...base, object: 'payment_intent', intentId: intent.id, state: intentState(intent) };
    }
    if (object.object === 'refund' && event.type.startsWith('refund.')) {
      const state = refundState(object as Stripe.Refund);
      return { ...base, object: 'refund', intentId: state.intentId, state };
    }
    return { ...base, object: 'other' };
  }

  /**
   * The event, if its signature verifies with one of the secrets (while a
   * secret is rolled, or when several endpoints deliver here, an event is
   * signed with only one of them); the SDK's last refusal otherwise.
   */
  private verifiedEvent(payload: Buffer, signature: string): Stripe.Event {
    let refusal: Error | undefined;
    for (const secret of this.webhookSecrets) {
      try {
        return this.stripe.webhooks.constructEvent(payload, signature, secret, WEBHOOK_TOLERANCE_S);
      } catch (error) {
        // The SDK parses the body once the signature verifies: signed bytes that are not JSON.
        if (error instanceof SyntaxError) throw new MalformedWebhookError('The signed body is not JSON.');
        if (!(error instanceof Stripe.errors.StripeSignatureVerificationError)) throw error;
        refusal = error;
      }
    }
    throw new InvalidWebhookError(refusal!.message);
  }
}

/**
 * A real card token (made by Stripe.js or the token API: `tok_` and an id that
 * starts with a digit, e.g. `tok_1N3T00LkdIwHu7ix`) is paid with as Stripe
 * documents it, through `payment_method_data[card][token]`. Stripe's test
 * tokens are words (`tok_visa`), and each has a test PaymentMethod of the same
 * name: tok_visa -> pm_card_visa. A PaymentMethod id goes as it is.
 */
export function paymentSource(source: string): { payment_method: string } | { payment_method_data: Stripe.PaymentIntentCreateParams.PaymentMethodData } {
  if (CARD_TOKEN.test(source)) {
    // Stripe accepts a card token here; the SDK's types list only the other method types.
    return { payment_method_data: { type: 'card', card: { token: source } } as unknown as Stripe.PaymentIntentCreateParams.PaymentMethodData };
  }
  return { payment_method: source.startsWith('tok_') ? `pm_card_${source.slice(4)}` : source };
}

/** A retrieve: the network not knowing the object (404) is its own answer, never "unknown outcome". */
function classifyRetrieve(error: unknown, what: string): Error {
  if (error instanceof Stripe.errors.StripeInvalidRequestError && error.statusCode === 404) {
    return new UnknownNetworkObjectError(`the card network does not know ${what}: ${error.message}`);
  }
  return classify(error);
}

function classify(error: unknown): Error {
  if (
    error instanceof Stripe.errors.StripeInvalidRequestError ||
    error instanceof Stripe.errors.StripeRateLimitError ||
    error instanceof Stripe.errors.StripeAuthenticationError ||
    error instanceof Stripe.errors.StripePermissionError
  ) {
    return new CardNetworkRefusedError(`the card network refused the call: ${error.message}`, {
      definitive: error instanceof Stripe.errors.StripeInvalidRequestError,
    });
  }
  if (error instanceof Stripe.errors.StripeError) {
    return new CardNetworkUnavailableError(`no definite answer from the card network: ${error.message}`);
  }
  return error instanceof Error ? error : new Error(String(error));
}

/** What parseWebhook reads of an event: its id, type and data.object. */
function isEvent(value: unknown): value is Stripe.Event {
  const e = value as { id?: unknown; type?: unknown; data?: { object?: unknown } } | null;
  return (
    typeof e === 'object' && e !== null && typeof e.id === 'string' && typeof e.type === 'string' &&
    typeof e.data === 'object' && e.data !== null && typeof e.data.object === 'object' && e.data.object !== null && !Array.isArray(e.data.object)
  );
}
