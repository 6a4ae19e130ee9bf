import { Injectable } from '@nestjs/common';
import { problems } from '../../http/problem';
import { CardNetwork, CardNetworkRefusedError, InvalidParameterError } from '../card-network/card-network';
import { PaymentResponse } from '../model/dto/payment.response';
import { HandOverReason, OperationAttention } from '../attention/operation-attention';
import { INTENT, PaymentOperation, networkKeys, settledByAnother, unknownOutcome } from '../model/payment-operations';
import { CardNetworkFailedException } from '../model/payments.errors';
import { PaymentRow, PaymentsRepository } from '../model/payments.repository';
import { PaymentConfirm } from './payment-confirm';

/**
 * A payment's charge, from Start on: create an UNCONFIRMED PaymentIntent (it
 * charges nothing), record its id (recovery point INTENT), then hand it to
 * the confirm phase (PaymentConfirm), which confirms it and has the network's
 * word recorded (PaymentFinish). From INTENT on, a resume of any age asks the
 * network about the recorded intent and acts on its status, so it never makes
 * a second charge. PaymentsService decides when these run (a request, a
 * resume, a person's decision, a webhook).
 */
@Injectable()
export class PaymentCharge {
  constructor(
    private readonly payments: PaymentsRepository,
    private readonly cardNetwork: CardNetwork,
    private readonly attention: OperationAttention,
    private readonly confirmation: PaymentConfirm,
  ) {}

  /** From INTENT: the network's word about the recorded intent; before it, the intent is made. */
  async resumeFromIntent(op: PaymentOperation, payment: PaymentRow): Promise<PaymentResponse> {
    const intentId = op.recoveryPoint === INTENT ? op.state?.intent_id : undefined;
    if (!intentId) return this.createAndConfirm(op, payment);
    return this.confirmation.resume(op, payment, intentId);
  }

  /** Before INTENT nothing was ever confirmed: the payment goes, its order is payable again and the key is free (502). */
  async releaseUncharged(op: PaymentOperation, payment: PaymentRow, reason: HandOverReason, evidence: string): Promise<never> {
    await op.release(() => this.payments.deleteProcessing(op.scope, payment.id));
    this.attention.releasedPayment(payment.id, op.scope, reason, evidence);
    throw new CardNetworkFailedException('charge');
  }

  /**
   * No intent of this payment was ever confirmed (none is recorded): create one
   * (the same one, within the network's key window), record it, then confirm it.
   */
  async createAndConfirm(op: PaymentOperation, payment: PaymentRow): Promise<PaymentResponse> {
    let intentId: string;
    try {
      intentId = await op.call(() =>
        this.cardNetwork.createIntent({
          amount: Number(payment.amount),
          currency: payment.currency,
          source: payment.payment_method ?? '',
          description: payment.description,
          idempotencyKey: networkKeys.createIntent(payment.id),
          metadata: {
            payment_id: payment.id,
            client_id: op.scope,
            ...(payment.order_id ? { order_id: payment.order_id } : {}),
          },
        }),
        'card_network.create_intent',
      );
    } catch (error) {
      if (error instanceof InvalidParameterError) {
        // The network's word on this payment's parameters, before any intent was confirmed:
        // nothing was charged, so the payment goes, the order is payable again and the key is free.
        await op.release(() => this.payments.deleteProcessing(op.scope, payment.id));
        throw problems.validationFailed([{ field: error.param, messages: [`refused by the card network: ${error.message}`] }]);
      }
      if (error instanceof CardNetworkRefusedError && error.definitive) return this.releaseUncharged(op, payment, 'refused', error.message);
      throw unknownOutcome(error);
    }
    await op.checkpoint(
      INTENT,
      async () => {
        if (!(await this.payments.attachIntent(op.scope, payment.id, intentId))) throw settledByAnother();
      },
      () => ({ payment_id: payment.id, intent_id: intentId }),
    );
    return this.confirmation.confirm(op, payment, intentId);
  }
}
