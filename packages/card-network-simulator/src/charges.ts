/**
 * One confirmation attempt of a PaymentIntent with its payment method, from
 * create (`confirm=true`) or /confirm, and the payment method it pays with:
 * a test method, or one made from a card token.
 */
import type { Cause, Outcome } from './account';
import { invalid, randomId, stripeId } from './api';
import type { Network } from './network';
import { ParsedParams, requiredString } from './params';
import { AUTHENTICATION_REQUIRED, isTestMethod, paymentMethod, PROCESSING_ERROR } from './payment-methods';
import { PaymentError, PaymentIntent } from './resources';
import { redeemToken, TOKEN_PARAM } from './tokens';

function succeed(net: Network, cause: Cause, intent: PaymentIntent): void {
  intent.status = 'succeeded';
  intent.amount_received = intent.amount;
  intent.latest_charge ??= randomId('ch_', 24);
  net.emit(cause, 'payment_intent.succeeded', intent);
}

/** A failed attempt: the intent waits for another payment method, the caller gets the card error (402). */
function fail(net: Network, cause: Cause, intent: PaymentIntent, error: PaymentError): Outcome {
  intent.status = 'requires_payment_method';
  intent.last_payment_error = error;
  net.emit(cause, 'payment_intent.payment_failed', intent);
  return { status: 402, body: { error: { ...error, payment_intent: intent } }, save: true };
}

/** `processing` now; `processingMs` later succeeded by itself, an effect no request caused. */
function startProcessing(net: Network, cause: Cause, intent: PaymentIntent): Outcome {
  intent.status = 'processing';
  intent.latest_charge = randomId('ch_', 24);
  net.emit(cause, 'payment_intent.processing', intent);
  net.later(net.settings.processingMs, () => {
    if (intent.status === 'processing') succeed(net, { account: cause.account, request: { id: null, idempotency_key: null } }, intent);
  });
  return { status: 200, body: intent, save: true };
}

/** One confirmation attempt with the intent's payment method. */
export function attempt(net: Network, cause: Cause, intent: PaymentIntent, errorOnRequiresAction: boolean): Outcome {
  const behaviour = paymentMethod(cause.account, intent.payment_method);
  intent.last_payment_error = null;
  intent.next_action = null;
  switch (behaviour.kind) {
    case 'charge':
      succeed(net, cause, intent);
      return { status: 200, body: intent, save: true, fault: behaviour.fault };
    case 'processing':
      return startProcessing(net, cause, intent);
    case 'authentication_required':
      if (errorOnRequiresAction) return fail(net, cause, intent, AUTHENTICATION_REQUIRED);
      intent.status = 'requires_action';
      intent.next_action = { type: 'use_stripe_sdk', use_stripe_sdk: { type: 'three_d_secure_redirect' } };
      net.emit(cause, 'payment_intent.requires_action', intent);
      return { status: 200, body: intent, save: true };
    case 'decline':
      return fail(net, cause, intent, { type: 'card_error', code: 'card_declined', decline_code: behaviour.decline_code, message: behaviour.message });
    case 'processing_error':
      return fail(net, cause, intent, PROCESSING_ERROR);
  }
}

/**
 * The intent's payment method: `payment_method`, or one made from a card token
 * (`payment_method_data`). Checked now; the returned function makes it (and
 * uses the token up) when the intent is created.
 */
export function intentMethod(cause: Cause, params: ParsedParams): () => string {
  const { account } = cause;
  const fromData = [...params.values.keys()].some((name) => name.startsWith('payment_method_data['));
  if (!fromData) {
    const method = requiredString(params, 'payment_method');
    paymentMethod(account, method);
    return () => method;
  }
  if (params.values.has('payment_method')) {
    throw invalid('You may only specify one of these parameters: payment_method, payment_method_data.', 'parameters_exclusive', 'payment_method_data');
  }
  const type = requiredString(params, 'payment_method_data[type]');
  if (type !== 'card') throw invalid(`Invalid payment_method_data[type]: ${type}. This network takes only card.`, undefined, 'payment_method_data[type]');
  const token = redeemToken(account.tokens, requiredString(params, TOKEN_PARAM), isTestMethod);
  return () => {
    token.spend();
    const id = stripeId('pm_');
    account.methods.set(id, token.method);
    return id;
  };
}
