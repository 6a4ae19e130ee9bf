/**
 * Refunds of a succeeded PaymentIntent: create, list (`?payment_intent=`) and
 * retrieve. Most settle at once; the refund test methods' settle `processingMs`
 * later (payment-methods.ts). Pending and succeeded refunds count against what
 * can still be refunded; a failed one gives its amount back.
 */
import type { Account, Cause, Outcome } from './account';
import { invalid, noSuch, randomId, unixSeconds } from './api';
import { Call, form, Route } from './call';
import { acceptPost } from './idempotency';
import type { Network } from './network';
import { checkMetadata, integer, MAX_AMOUNT, paginate, ParsedParams, parseParams, requiredString } from './params';
import { paymentMethod } from './payment-methods';
import { IntentRecord, Refund } from './resources';
import { sendJson } from './reply';

/** The intent to refund and the amount, checked against what it still has to give back. */
function refundable(cause: Cause, id: string, requested: number | undefined): { record: IntentRecord; amount: number } {
  const record = cause.account.intents.get(id);
  if (!record) throw noSuch('payment_intent', id, 'payment_intent');
  const { intent } = record;
  if (intent.status !== 'succeeded') {
    throw invalid(`This PaymentIntent (${id}) does not have a successful charge to refund.`, 'payment_intent_unexpected_state', 'payment_intent');
  }
  // A pending refund counts against what can be refunded, as Stripe's does; a failed one no longer.
  const remaining = intent.amount_received - record.refunded;
  if (remaining <= 0) throw invalid(`Charge ${intent.latest_charge} has already been refunded.`, 'charge_already_refunded');
  const amount = requested ?? remaining;
  if (amount > remaining) {
    throw invalid(`Refund amount (${amount}) is greater than unrefunded amount on charge (${remaining})`, 'amount_too_large', 'amount');
  }
  return { record, amount };
}

function createRefund(net: Network, cause: Cause, params: ParsedParams): () => Outcome {
  const id = requiredString(params, 'payment_intent');
  const requested = integer(params, 'amount', 1, MAX_AMOUNT, 'amount_too_small');
  const metadata = checkMetadata(params.metadata);
  const { record, amount } = refundable(cause, id, requested);
  const { intent } = record;
  const behaviour = paymentMethod(cause.account, intent.payment_method);
  const flow = behaviour.kind === 'charge' ? behaviour.refund : undefined;

  return () => {
    record.refunded += amount;
    const refund: Refund = {
      id: randomId('re_', 24),
      object: 'refund',
      amount,
      charge: intent.latest_charge,
      currency: intent.currency,
      payment_intent: id,
      status: flow === 'pending_then_succeeded' || flow === 'pending_then_failed' ? 'pending' : 'succeeded',
      metadata,
      created: unixSeconds(),
    };
    cause.account.refunds.set(refund.id, refund);
    net.emit(cause, 'refund.created', refund);
    if (flow) net.later(net.settings.processingMs, () => settleRefund(net, cause.account, record, refund, flow === 'pending_then_succeeded' ? 'succeeded' : 'failed'));
    return { status: 200, body: refund, save: true };
  };
}

/**
 * The card network's later word on a refund, with no request behind it. A
 * failed refund gives its amount back: the charge can be refunded again.
 */
function settleRefund(net: Network, account: Account, record: IntentRecord, refund: Refund, status: 'succeeded' | 'failed'): void {
  const cause: Cause = { account, request: { id: null, idempotency_key: null } };
  refund.status = status;
  if (status === 'failed') {
    refund.failure_reason = 'declined';
    record.refunded -= refund.amount;
  }
  net.emit(cause, 'refund.updated', refund);
  if (status === 'failed') net.emit(cause, 'refund.failed', refund);
}

function create(call: Call): void {
  const params = parseParams(form(call), ['payment_intent', 'amount'], true);
  acceptPost(call, params, (cause) => createRefund(call.net, cause, params));
}

function list(call: Call): void {
  const params = parseParams(call.query, ['limit', 'starting_after', 'payment_intent'], false);
  const intentId = params.values.get('payment_intent');
  if (intentId !== undefined && !call.account.intents.has(intentId)) throw noSuch('payment_intent', intentId, 'payment_intent');
  const newestFirst = [...call.account.refunds.values()].reverse().filter((r) => intentId === undefined || r.payment_intent === intentId);
  sendJson(call.res, 200, paginate(newestFirst, params, '/v1/refunds', 'refund'));
}

function retrieve(call: Call, match: RegExpExecArray): void {
  parseParams(call.query, [], false);
  const id = decodeURIComponent(match[1]);
  const found = call.account.refunds.get(id);
  if (!found) throw noSuch('refund', id, 'id', 404);
  sendJson(call.res, 200, found);
}

export const REFUND_ROUTES: readonly Route[] = [
  { pattern: /^\/v1\/refunds$/, handlers: { GET: list, POST: create } },
  { pattern: /^\/v1\/refunds\/([^/]+)$/, handlers: { GET: retrieve } },
];
