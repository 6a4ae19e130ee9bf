import { BusinessOutcomeException, ProblemException } from '../common/problem';
import { DeclineCode } from './card-network/card-network';

export enum PaymentErrorCode {
  CardDeclined = 'card_declined',
  InsufficientFunds = 'insufficient_funds',
  OrderNotPayable = 'order_not_payable',
  AmountMismatch = 'amount_mismatch',
  RefundExceedsPayment = 'refund_exceeds_payment',
  PaymentNotRefundable = 'payment_not_refundable',
  CardNetworkError = 'card_network_error',
  CardNetworkUnavailable = 'card_network_unavailable',
  OrderPaymentConflict = 'order_payment_conflict',
}

/** 402: the card was declined; the failed payment is recorded, stored and replayed. */
export class PaymentDeclinedException extends BusinessOutcomeException {
  constructor(code: DeclineCode, paymentId: string) {
    super({
      status: 402,
      code: code === 'insufficient_funds' ? PaymentErrorCode.InsufficientFunds : PaymentErrorCode.CardDeclined,
      title: 'Payment Declined',
      detail: code === 'insufficient_funds' ? 'The card has insufficient funds.' : 'The card was declined.',
      extensions: { payment_id: paymentId },
    });
  }
}

export class OrderNotPayableException extends BusinessOutcomeException {
  constructor(orderId: string, reason: string) {
    super({ status: 422, code: PaymentErrorCode.OrderNotPayable, title: 'Order Not Payable', detail: `Order ${orderId} ${reason}.` });
  }
}

export class AmountMismatchException extends BusinessOutcomeException {
  constructor(orderId: string, expected: { amount: number; currency: string }) {
    super({
      status: 422,
      code: PaymentErrorCode.AmountMismatch,
      title: 'Amount Mismatch',
      detail: `Order ${orderId} must be paid exactly ${expected.amount} ${expected.currency}.`,
      extensions: { expected_amount: expected.amount, expected_currency: expected.currency },
    });
  }
}

export class RefundExceedsPaymentException extends BusinessOutcomeException {
  constructor(paymentId: string, remaining: number) {
    super({
      status: 422,
      code: PaymentErrorCode.RefundExceedsPayment,
      title: 'Refund Exceeds Payment',
      detail: `Payment ${paymentId} has ${remaining} left to refund.`,
      extensions: { refundable_amount: remaining },
    });
  }
}

export class PaymentNotRefundableException extends BusinessOutcomeException {
  constructor(paymentId: string) {
    super({
      status: 422,
      code: PaymentErrorCode.PaymentNotRefundable,
      title: 'Payment Not Refundable',
      detail: `Payment ${paymentId} did not succeed; only succeeded payments can be refunded.`,
    });
  }
}

/** 502: the network answered that it did nothing; nothing is recorded and the key is released. */
export class CardNetworkFailedException extends ProblemException {
  constructor() {
    super({
      status: 502,
      code: PaymentErrorCode.CardNetworkError,
      title: 'Card Network Error',
      detail: 'The card network could not process the charge. Nothing was charged; retry with the same Idempotency-Key.',
    });
  }
}

/**
 * 503: the card network gave no definite answer (timeout, dropped connection,
 * 5xx). The charge may have happened: the payment stays processing and the key
 * stays claimed, and a retry with the same key resumes at once and learns the
 * outcome (the network's idempotency makes it the same charge).
 */
export class CardNetworkUnavailableException extends ProblemException {
  constructor() {
    super({
      status: 503,
      code: PaymentErrorCode.CardNetworkUnavailable,
      title: 'Card Network Unavailable',
      detail:
        'The card network did not answer in time; the charge may or may not have happened. Retry with the same Idempotency-Key and body to get the outcome: it is never charged twice.',
      headers: { 'Retry-After': '1' },
    });
  }
}

/** The database refused a second successful payment of one order (the second guard). */
export class OrderPaymentConflictException extends ProblemException {
  constructor(orderId: string) {
    super({
      status: 409,
      code: PaymentErrorCode.OrderPaymentConflict,
      title: 'Order Payment Conflict',
      detail: `Another payment of order ${orderId} is in progress or has succeeded. Retry to see the outcome.`,
      headers: { 'Retry-After': '1' },
    });
  }
}
