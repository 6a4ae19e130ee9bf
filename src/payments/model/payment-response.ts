import { PaymentResponse, RefundResponse } from './dto/payment.response';
import { PaymentRow, RefundRow } from './payments.repository';

/** A payment's row as the API answers it: money as numbers of minor units, the time as ISO 8601. */
export function toPaymentResponse(row: PaymentRow): PaymentResponse {
  return {
    id: row.id,
    status: row.status,
    amount: Number(row.amount),
    currency: row.currency,
    order_id: row.order_id,
    description: row.description,
    amount_refunded: Number(row.amount_refunded),
    failure_code: row.failure_code,
    created_at: row.created_at.toISOString(),
  };
}

/** A refund's row as the API answers it. */
export function toRefundResponse(row: RefundRow): RefundResponse {
  return {
    id: row.id,
    payment_id: row.payment_id,
    amount: Number(row.amount),
    status: row.status,
    failure_reason: row.failure_reason,
    created_at: row.created_at.toISOString(),
  };
}
