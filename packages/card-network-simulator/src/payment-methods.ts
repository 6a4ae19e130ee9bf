/**
 * The test PaymentMethods, by what confirming with each does. Stripe's own
 * (`pm_card_visa`, `pm_card_chargeDeclined`, ...) plus the simulator's:
 *
 * - pm_card_chargeThenDrop, pm_card_chargeThenHang and pm_card_chargeThenError
 *   charge like pm_card_visa and save the success under the Idempotency-Key,
 *   but the first answer is lost (the socket destroyed, no answer, a 500); a
 *   replay then answers normally.
 * - pm_card_chargeProcessing stays `processing` for `processingMs`, then succeeds.
 * - Refunds of pm_card_refundPending (pending, then succeeded: refund.updated),
 *   pm_card_refundPendingFail (pending, then failed: refund.updated, refund.failed,
 *   the amount refundable again) and pm_card_refundFail (succeeded, then failed
 *   the same way, as Stripe's asynchronous failure card) settle `processingMs`
 *   later; they charge like pm_card_visa. Every other method's refund succeeds at once.
 */
import type { Account } from './account';
import { invalid } from './api';
import type { LostAnswerFault } from './faults';
import { PaymentError } from './resources';

/** When a refund of a charge settles: at once, or `processingMs` later as succeeded or failed. */
export type RefundFlow = 'pending_then_succeeded' | 'pending_then_failed' | 'succeeded_then_failed';

export type MethodBehaviour =
  | { kind: 'charge'; fault?: LostAnswerFault; refund?: RefundFlow }
  | { kind: 'decline'; decline_code: string; message: string }
  | { kind: 'processing_error' }
  | { kind: 'authentication_required' }
  | { kind: 'processing' };

const PAYMENT_METHODS: Record<string, MethodBehaviour> = {
  pm_card_visa: { kind: 'charge' },
  pm_card_mastercard: { kind: 'charge' },
  pm_card_amex: { kind: 'charge' },
  pm_card_chargeDeclined: { kind: 'decline', decline_code: 'generic_decline', message: 'Your card was declined.' },
  pm_card_chargeDeclinedInsufficientFunds: {
    kind: 'decline',
    decline_code: 'insufficient_funds',
    message: 'Your card has insufficient funds.',
  },
  pm_card_processingError: { kind: 'processing_error' },
  pm_card_authenticationRequired: { kind: 'authentication_required' },
  pm_card_chargeProcessing: { kind: 'processing' },
  pm_card_chargeThenDrop: { kind: 'charge', fault: 'drop' },
  pm_card_chargeThenHang: { kind: 'charge', fault: 'hang' },
  pm_card_chargeThenError: { kind: 'charge', fault: 'error' },
  pm_card_refundPending: { kind: 'charge', refund: 'pending_then_succeeded' },
  pm_card_refundPendingFail: { kind: 'charge', refund: 'pending_then_failed' },
  pm_card_refundFail: { kind: 'charge', refund: 'succeeded_then_failed' },
};

export const PROCESSING_ERROR: PaymentError = {
  type: 'card_error',
  code: 'processing_error',
  message: 'An error occurred while processing your card. Try again in a little bit.',
};
export const AUTHENTICATION_REQUIRED: PaymentError = {
  type: 'card_error',
  code: 'authentication_required',
  decline_code: 'authentication_required',
  message: 'Your card was declined. This transaction requires authentication.',
};

export const isTestMethod = (name: string): boolean => Object.hasOwn(PAYMENT_METHODS, name);

/** A test PaymentMethod by name (or one made from a token), or the 400 Stripe answers for an unknown one. */
export function paymentMethod(account: Account, name: string): MethodBehaviour {
  const test = account.methods.get(name) ?? name;
  if (!isTestMethod(test)) throw invalid(`No such PaymentMethod: '${name}'`, 'resource_missing', 'payment_method');
  return PAYMENT_METHODS[test];
}
