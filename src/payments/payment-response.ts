import { PaymentResponse } from './dto/payment.response';
import { PaymentRow } from './payments.repository';

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
