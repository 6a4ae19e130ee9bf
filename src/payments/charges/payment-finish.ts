import { Injectable } from '@nestjs/common';
import { OrdersService } from '../../orders/orders.service';
import { IntentState } from '../card-network/card-network';
import { PaymentResponse } from '../model/dto/payment.response';
import { PaymentOperation, settledByAnother } from '../model/payment-operations';
import { PaymentRecords, settlementOf } from '../model/payment-records';
import { toPaymentResponse } from '../model/payment-response';
import { PaymentDeclinedException, PaymentProcessingException } from '../model/payments.errors';
import { PaymentRow } from '../model/payments.repository';

/**
 * A payment's Finish phase: the network's word about its intent recorded, in
 * one transaction with the stored response. Succeeded: its order is paid
 * (201); failed: the decline is the stored answer (402). What is final is
 * the model's reading of the network's word (settlementOf).
 */
@Injectable()
export class PaymentFinish {
  constructor(
    private readonly records: PaymentRecords,
    private readonly orders: OrdersService,
  ) {}

  /** What the network said about the payment's intent, recorded. */
  async conclude(op: PaymentOperation, payment: PaymentRow, state: IntentState): Promise<PaymentResponse> {
    const settlement = settlementOf(state);
    // Not settled yet: the key and the recovery point stay; a webhook or a retry settles it.
    if (!settlement) throw new PaymentProcessingException(payment.id);
    return op.finish(
      async () => {
        const settled = await this.records.settle(op.scope, payment.id, settlement);
        if (!settled) throw settledByAnother();
        if (settlement.status === 'failed') throw new PaymentDeclinedException(settlement.failure, settled.id);
        if (settled.order_id) await this.orders.markPaid(op.scope, settled.order_id);
        return toPaymentResponse(settled);
      },
      { location: (p) => `/payments/${p.id}` },
    );
  }
}
