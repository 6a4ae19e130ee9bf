import { BusinessOutcomeException } from '../../http/problem';

/**
 * Refunds of one payment are capped: every refund is a card network call, a row
 * and an entry in `GET /payments/{id}`, and refunds of 1 minor unit each would
 * otherwise let one payment grow without bound. Checked under the payment's row
 * lock (PaymentsRepository.reserveRefund), so concurrent refunds cannot pass it.
 */
export const MAX_REFUNDS_PER_PAYMENT = 100;

export const REFUND_LIMIT_REACHED = 'refund_limit_reached';

/** 422: the payment already has MAX_REFUNDS_PER_PAYMENT refunds; stored and replayed like any outcome. */
export class RefundLimitReachedException extends BusinessOutcomeException {
  constructor(paymentId: string) {
    super({
      status: 422,
      code: REFUND_LIMIT_REACHED,
      title: 'Refund Limit Reached',
      detail: `Payment ${paymentId} already has ${MAX_REFUNDS_PER_PAYMENT} refunds, the most one payment may have.`,
      extensions: { max_refunds: MAX_REFUNDS_PER_PAYMENT },
    });
  }
}
