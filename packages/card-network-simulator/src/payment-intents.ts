/**
 * PaymentIntents: create (and confirm at once with `confirm=true`), confirm,
 * cancel, list and retrieve, with the states Stripe allows each action in
 * (`payment_intent_unexpected_state` otherwise).
 */
import type { Cause, Outcome } from './account';
import { ApiError, invalid, noSuch, randomId, unixSeconds } from './api';
import { Call, form, Route } from './call';
import { attempt, intentMethod } from './charges';
import { acceptPost } from './idempotency';
import { checkCurrency, checkMinimum } from './money';
import type { Network } from './network';
import { boolean, checkMetadata, emptyRefused, integer, MAX_AMOUNT, paginate, ParsedParams, parseParams, requiredString } from './params';
import { paymentMethod } from './payment-methods';
import { IntentRecord, PaymentIntent, PaymentIntentStatus } from './resources';
import { sendJson } from './reply';
import { TOKEN_PARAM } from './tokens';

/** Where each action is allowed, as Stripe's payment_intent_unexpected_state enforces it. */
const CONFIRMABLE: readonly PaymentIntentStatus[] = ['requires_confirmation', 'requires_payment_method'];
const CANCELABLE: readonly PaymentIntentStatus[] = ['requires_payment_method', 'requires_confirmation', 'requires_action'];
const CANCELLATION_REASONS = ['duplicate', 'fraudulent', 'requested_by_customer', 'abandoned'];

/**
 * What POST /v1/payment_intents accepts. `automatic_payment_methods[...]` is how a
 * server confirms a card with no redirect-based method (Stripe then needs no
 * return_url); every card here is such a method, so it is accepted and changes nothing.
 * `payment_method_data[...]` pays with a card token instead of `payment_method`.
 */
const PAYMENT_INTENT_PARAMS = [
  'amount',
  'currency',
  'payment_method',
  'payment_method_data[type]',
  TOKEN_PARAM,
  'confirm',
  'error_on_requires_action',
  'description',
  'automatic_payment_methods[enabled]',
  'automatic_payment_methods[allow_redirects]',
] as const;
const CONFIRM_PARAMS = ['payment_method', 'error_on_requires_action'] as const;
const CANCEL_PARAMS = ['cancellation_reason'] as const;

function unexpectedState(intent: PaymentIntent, message: string): ApiError {
  return new ApiError(400, {
    type: 'invalid_request_error',
    code: 'payment_intent_unexpected_state',
    message,
    payment_intent: structuredClone(intent),
  });
}

function notIn(action: 'confirm' | 'cancel', intent: PaymentIntent, allowed: readonly PaymentIntentStatus[]): ApiError {
  const done = action === 'confirm' ? 'confirmed' : 'canceled';
  return unexpectedState(
    intent,
    `You cannot ${action} this PaymentIntent because it has a status of ${intent.status}. Only a PaymentIntent with one of the following statuses may be ${done}: ${allowed.join(', ')}.`,
  );
}

function intentRecord(cause: Cause, id: string): IntentRecord {
  const record = cause.account.intents.get(id);
  if (!record) throw noSuch('payment_intent', id, 'intent', 404);
  return record;
}

function createPaymentIntent(net: Network, cause: Cause, params: ParsedParams): () => Outcome {
  const amount = integer(params, 'amount', 1, MAX_AMOUNT, 'amount_too_small');
  if (amount === undefined) throw invalid('Missing required param: amount.', 'parameter_missing', 'amount');
  const currency = checkCurrency(requiredString(params, 'currency'));
  checkMinimum(amount, currency);
  const method = intentMethod(cause, params);
  const confirm = boolean(params, 'confirm');
  const errorOnRequiresAction = boolean(params, 'error_on_requires_action');
  const description = params.values.get('description') ?? null;
  const metadata = checkMetadata(params.metadata);

  return () => {
    const intent: PaymentIntent = {
      id: randomId('pi_', 24),
      object: 'payment_intent',
      amount,
      amount_received: 0,
      currency,
      status: 'requires_confirmation',
      payment_method: method(),
      confirmation_method: 'automatic',
      description,
      metadata,
      created: unixSeconds(),
      latest_charge: null,
      last_payment_error: null,
      next_action: null,
      canceled_at: null,
      cancellation_reason: null,
      livemode: false,
    };
    cause.account.intents.set(intent.id, { intent, refunded: 0 });
    if (!confirm) return { status: 200, body: intent, save: true };
    return attempt(net, cause, intent, errorOnRequiresAction);
  };
}

function confirmPaymentIntent(net: Network, cause: Cause, id: string, params: ParsedParams): () => Outcome {
  const { intent } = intentRecord(cause, id);
  const method = params.values.get('payment_method');
  if (method === '') throw emptyRefused('payment_method');
  if (method !== undefined) paymentMethod(cause.account, method);
  const errorOnRequiresAction = boolean(params, 'error_on_requires_action');
  if (intent.status === 'succeeded') {
    throw unexpectedState(intent, 'You cannot confirm this PaymentIntent because it has already succeeded after being previously confirmed.');
  }
  if (!CONFIRMABLE.includes(intent.status)) throw notIn('confirm', intent, CONFIRMABLE);
  return () => {
    if (method !== undefined) intent.payment_method = method;
    return attempt(net, cause, intent, errorOnRequiresAction);
  };
}

function cancelPaymentIntent(net: Network, cause: Cause, id: string, params: ParsedParams): () => Outcome {
  const { intent } = intentRecord(cause, id);
  const reason = params.values.get('cancellation_reason');
  if (reason !== undefined && !CANCELLATION_REASONS.includes(reason)) {
    throw invalid(`Invalid cancellation_reason: must be one of ${CANCELLATION_REASONS.join(', ')}`, 'parameter_invalid_string', 'cancellation_reason');
  }
  if (!CANCELABLE.includes(intent.status)) throw notIn('cancel', intent, CANCELABLE);
  return () => {
    intent.status = 'canceled';
    intent.canceled_at = unixSeconds();
    intent.cancellation_reason = reason ?? null;
    intent.next_action = null;
    net.emit(cause, 'payment_intent.canceled', intent);
    return { status: 200, body: intent, save: true };
  };
}

function create(call: Call): void {
  const params = parseParams(form(call), PAYMENT_INTENT_PARAMS, true);
  acceptPost(call, params, (cause) => createPaymentIntent(call.net, cause, params));
}

function act(call: Call, match: RegExpExecArray): void {
  const id = decodeURIComponent(match[1]);
  if (match[2] === 'confirm') {
    const params = parseParams(form(call), CONFIRM_PARAMS, false);
    return acceptPost(call, params, (cause) => confirmPaymentIntent(call.net, cause, id, params));
  }
  const params = parseParams(form(call), CANCEL_PARAMS, false);
  acceptPost(call, params, (cause) => cancelPaymentIntent(call.net, cause, id, params));
}

function list(call: Call): void {
  const params = parseParams(call.query, ['limit', 'starting_after'], false);
  const newestFirst = [...call.account.intents.values()].reverse().map((r) => r.intent);
  sendJson(call.res, 200, paginate(newestFirst, params, '/v1/payment_intents', 'payment_intent'));
}

function retrieve(call: Call, match: RegExpExecArray): void {
  parseParams(call.query, [], false);
  const id = decodeURIComponent(match[1]);
  const found = call.account.intents.get(id)?.intent;
  if (!found) throw noSuch('payment_intent', id, 'id', 404);
  sendJson(call.res, 200, found);
}

export const PAYMENT_INTENT_ROUTES: readonly Route[] = [
  { pattern: /^\/v1\/payment_intents$/, handlers: { GET: list, POST: create } },
  { pattern: /^\/v1\/payment_intents\/([^/]+)$/, handlers: { GET: retrieve } },
  { pattern: /^\/v1\/payment_intents\/([^/]+)\/(confirm|cancel)$/, handlers: { POST: act } },
];
