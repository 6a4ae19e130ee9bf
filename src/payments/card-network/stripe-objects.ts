import Stripe from 'stripe';
import { ChargeFailure, IntentState, InvalidParameterError, RefundState } from './card-network';

/**
 * Stripe's objects in the card network port's terms: what an intent's status,
 * a card error or a refund says, and nothing more.
 */

/** A refused parameter of a payment, in our terms; undefined for anything else. */
export function paymentParam(param: string | undefined): InvalidParameterError['param'] | undefined {
  if (param === 'amount' || param === 'currency') return param;
  if (param === 'payment_method' || param?.startsWith('payment_method_data')) return 'source';
  return undefined;
}

export function failureOf(code: string | null | undefined, declineCode: string | null | undefined): ChargeFailure {
  if (code === 'authentication_required' || declineCode === 'authentication_required') return 'authentication_required';
  if (code === 'processing_error') return 'processing_error';
  return declineCode === 'insufficient_funds' ? 'insufficient_funds' : 'card_declined';
}

export function intentState(intent: Stripe.PaymentIntent): IntentState {
  switch (intent.status) {
    case 'succeeded':
      return { status: 'succeeded' };
    // Manual capture is never asked for; an intent waiting for it is not ours to settle.
    case 'processing':
    case 'requires_capture':
      return { status: 'processing' };
    case 'requires_confirmation':
      return { status: 'requires_confirmation' };
    case 'requires_payment_method': {
      const error = intent.last_payment_error;
      return error ? { status: 'failed', failure: failureOf(error.code, error.decline_code) } : { status: 'requires_confirmation' };
    }
    // Confirmed with error_on_requires_action: the holder is not there to authenticate.
    case 'requires_action':
      return { status: 'failed', failure: 'authentication_required' };
    case 'canceled':
      return { status: 'failed', failure: 'canceled' };
    default:
      // A status this code does not know settles nothing.
      return { status: 'processing' };
  }
}

export function refundState(refund: Stripe.Refund): RefundState {
  const status = refund.status === 'succeeded' ? 'succeeded' : refund.status === 'failed' || refund.status === 'canceled' ? 'failed' : 'pending';
  const intentId = typeof refund.payment_intent === 'string' ? refund.payment_intent : (refund.payment_intent?.id ?? '');
  return {
    status,
    refundId: refund.id,
    intentId,
    amount: refund.amount,
    metadata: refund.metadata ?? {},
    ...(refund.failure_reason ? { failureReason: refund.failure_reason } : {}),
  };
}
