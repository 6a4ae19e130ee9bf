import { BusinessOutcomeException, ProblemException } from '../../http/problem';
import { ChargeFailure } from '../card-network/card-network';

export enum PaymentErrorCode {
  CardDeclined = 'card_declined',
  InsufficientFunds = 'insufficient_funds',
  AuthenticationRequired = 'authentication_required',
  PaymentCanceled = 'payment_canceled',
  PaymentProcessing = 'payment_processing',
  OrderNotPayable = 'order_not_payable',
  AmountMismatch = 'amount_mismatch',
  RefundExceedsPayment = 'refund_exceeds_payment',
  PaymentNotRefundable = 'payment_not_refundable',
  CardNetworkError = 'card_network_error',
  CardNetworkUnavailable = 'card_network_unavailable',
  OrderPaymentConflict = 'order_payment_conflict',
  CardNetworkObjectUnknown = 'card_network_object_unknown',
  RequiresAttention = 'requires_attention',
  FailedByOperator = 'failed_by_operator',
}

/** Why a charge failed, as the client reads it. */
const DECLINES: Record<Exclude<ChargeFailure, 'processing_error'>, { code: PaymentErrorCode; detail: string }> = {
  card_declined: { code: PaymentErrorCode.CardDeclined, detail: 'The card was declined.' },
  insufficient_funds: { code: PaymentErrorCode.InsufficientFunds, detail: 'The card has insufficient funds.' },
  authentication_required: {
    code: PaymentErrorCode.AuthenticationRequired,
    detail: 'The card requires its holder to authenticate the payment; a server-side payment cannot. Use another card.',
  },
  canceled: { code: PaymentErrorCode.PaymentCanceled, detail: 'The payment was canceled at the card network.' },
};

export type DeclineReason = keyof typeof DECLINES;

/** 402: the card network did not charge the card; the failed payment is recorded, stored and replayed. */
export class PaymentDeclinedException extends BusinessOutcomeException {
  constructor(reason: DeclineReason, paymentId: string) {
    const { code, detail } = DECLINES[reason];
    super({ status: 402, code, title: 'Payment Declined', detail, extensions: { payment_id: paymentId } });
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

/** 502: the network's own word shows nothing was charged (or refunded); nothing is recorded and the key is released. */
export class CardNetworkFailedException extends ProblemException {
  constructor(what: 'charge' | 'refund' = 'charge') {
    super({
      status: 502,
      code: PaymentErrorCode.CardNetworkError,
      title: 'Card Network Error',
      detail: `The card network could not process the ${what}. Nothing was ${what === 'charge' ? 'charged' : 'refunded'}; retry with the same Idempotency-Key.`,
    });
  }
}

/**
 * 503: the card network gave no answer that settles the operation (timeout,
 * dropped connection, 5xx, or a refusal that speaks only for the last call).
 * The charge may have happened: the payment stays processing and the key stays
 * claimed, and a retry with the same key resumes at once and asks the network
 * about the operation's own object: it is never charged twice.
 */
export class CardNetworkUnavailableException extends ProblemException {
  constructor() {
    super({
      status: 503,
      code: PaymentErrorCode.CardNetworkUnavailable,
      title: 'Card Network Unavailable',
      detail:
        'The card network gave no definite answer; the charge may or may not have happened. Retry with the same Idempotency-Key and body to get the outcome: it is never charged twice.',
      headers: { 'Retry-After': '1' },
    });
  }
}

/**
 * 502: the card network does not know the intent or refund this operation
 * recorded from its own answer (a wrong account or API key). Nothing is
 * concluded about the money: the operation stays open and is tried again after
 * an hour (an operator's fix is picked up then); retries meanwhile get 409.
 */
export class UnknownNetworkObjectException extends ProblemException {
  constructor(object: 'intent' | 'refund') {
    super({
      status: 502,
      code: PaymentErrorCode.CardNetworkObjectUnknown,
      title: 'Card Network Object Unknown',
      detail: `The card network does not know this operation's ${object === 'intent' ? 'payment intent' : 'refund'}. Nothing is concluded about the money; the operation is kept and tried again within the hour. Retry later with the same Idempotency-Key.`,
      headers: { 'Retry-After': '3600' },
    });
  }
}

/** 503: the card network is still processing the charge; its webhook or a retry settles it. */
export class PaymentProcessingException extends ProblemException {
  constructor(paymentId: string) {
    super({
      status: 503,
      code: PaymentErrorCode.PaymentProcessing,
      title: 'Payment Processing',
      detail: 'The card network is still processing this payment. Retry with the same Idempotency-Key and body to get the outcome.',
      headers: { 'Retry-After': '5' },
      extensions: { payment_id: paymentId },
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

/**
 * 409: the operation was handed to a person (the card network refuses every
 * resume and cannot tell whether an earlier attempt acted, or its outcome
 * stayed unknown past its bound). Nothing more is tried on its own; what it
 * reserved stays reserved until an operator decides, and the key then answers
 * with the outcome.
 */
export class RequiresAttentionException extends ProblemException {
  constructor(operation: 'payment' | 'refund', recordId: string, attentionId: string, retryAfterS: number) {
    super({
      status: 409,
      code: PaymentErrorCode.RequiresAttention,
      title: 'Requires Attention',
      detail: `This ${operation}'s outcome cannot be learned from the card network; it was handed to a person, and what it reserved stays reserved until they decide. Retry later with the same Idempotency-Key to get the outcome, or look it up.`,
      headers: { 'Retry-After': String(retryAfterS) },
      extensions: { [`${operation}_id`]: recordId, attention_id: attentionId },
    });
  }
}

/** 422: an operator marked the operation failed (it required attention); nothing stays reserved. Stored and replayed. */
export class FailedByOperatorException extends BusinessOutcomeException {
  constructor(operation: 'payment' | 'refund', recordId: string) {
    const freed = operation === 'payment' ? 'the order is payable again' : 'its amount is refundable again';
    super({
      status: 422,
      code: PaymentErrorCode.FailedByOperator,
      title: 'Failed By Operator',
      detail: `The ${operation} required attention and an operator marked it failed: ${freed}.`,
      extensions: { [`${operation}_id`]: recordId },
    });
  }
}
