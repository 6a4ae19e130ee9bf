import { Injectable } from '@nestjs/common';
import { problems } from '../../http/problem';
import { OrdersService } from '../../orders/orders.service';
import { CardNetwork, CardNetworkRefusedError, IntentState, InvalidParameterError } from '../card-network/card-network';
import { PaymentResponse } from '../model/dto/payment.response';
import { HandOverReason, OperationAttention } from '../attention/operation-attention';
import { INTENT, NetworkCalls, PaymentOperation, intentObject, networkKeys, settledByAnother, unknownOutcome } from '../model/payment-operations';
import { PaymentRecords } from '../model/payment-records';
import { toPaymentResponse } from '../model/payment-response';
import { CardNetworkFailedException, PaymentDeclinedException, PaymentProcessingException } from '../model/payments.errors';
import { PaymentRow, PaymentsRepository } from '../model/payments.repository';

/**
 * A payment's charge phases at the card network, from Start on: create an
 * UNCONFIRMED PaymentIntent (it charges nothing), record its id (recovery
 * point INTENT), confirm it, and record what the network says about that
 * intent (Finish). From INTENT on, a resume of any age asks the network about
 * the recorded intent and acts on its status, so it never makes a second
 * charge; an intent that must never charge (a payment released) is canceled
 * first. PaymentsService decides when these run (a request, a resume, a
 * person's decision, a webhook).
 */
@Injectable()
export class PaymentCharge {
  constructor(
    private readonly payments: PaymentsRepository,
    private readonly orders: OrdersService,
    private readonly cardNetwork: CardNetwork,
    private readonly network: NetworkCalls,
    private readonly attention: OperationAttention,
    private readonly records: PaymentRecords,
  ) {}

  /** From INTENT: the network's word about the recorded intent; before it, the intent is made. */
  async resumeFromIntent(op: PaymentOperation, payment: PaymentRow): Promise<PaymentResponse> {
    const intentId = op.recoveryPoint === INTENT ? op.state?.intent_id : undefined;
    if (!intentId) return this.createAndConfirm(op, payment);
    // The network's own word about the one intent this payment may have charged.
    const state = await this.network.ask(op, intentObject(payment.id, intentId), 'card_network.retrieve_intent', () =>
      this.cardNetwork.retrieveIntent(intentId),
    );
    if (state.status === 'requires_confirmation') return this.confirm(op, payment, intentId);
    return this.conclude(op, payment, intentId, state);
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
    return this.confirm(op, payment, intentId);
  }

  private async confirm(op: PaymentOperation, payment: PaymentRow, intentId: string): Promise<PaymentResponse> {
    const state = await this.network.ask(op, intentObject(payment.id, intentId), 'card_network.confirm_intent', () =>
      this.cardNetwork.confirmIntent(intentId, networkKeys.confirmIntent(payment.id)),
    );
    return this.conclude(op, payment, intentId, state);
  }

  /** What the network said about the payment's intent, recorded. */
  async conclude(op: PaymentOperation, payment: PaymentRow, intentId: string, state: IntentState): Promise<PaymentResponse> {
    switch (state.status) {
      case 'requires_confirmation':
      case 'processing':
        // Not settled yet: the key and the recovery point stay; a webhook or a retry settles it.
        throw new PaymentProcessingException(payment.id);
      case 'failed':
        if (state.failure === 'processing_error') return this.releaseIntent(op, payment, intentId);
        return this.finishPayment(op, payment, state);
      case 'succeeded':
        return this.finishPayment(op, payment, state);
    }
  }

  /**
   * The network's word about this intent: not charged. Nothing is kept and a
   * retry pays anew, but the intent could still be confirmed: it is canceled
   * first, and the cancel's answer is the network's latest word (a charge made
   * since is recorded). Until the network answers, the outcome stays unknown.
   */
  private async releaseIntent(op: PaymentOperation, payment: PaymentRow, intentId: string): Promise<PaymentResponse> {
    const after = await this.network.ask(op, intentObject(payment.id, intentId), 'card_network.cancel_intent', () =>
      this.cardNetwork.cancelIntent(intentId, networkKeys.cancelIntent(payment.id)),
    );
    if (after.status !== 'failed') return this.conclude(op, payment, intentId, after);
    await op.release(() => this.payments.deleteProcessing(op.scope, payment.id));
    throw new CardNetworkFailedException('charge');
  }

  private finishPayment(op: PaymentOperation, payment: PaymentRow, state: IntentState & { status: 'succeeded' | 'failed' }): Promise<PaymentResponse> {
    return op.finish(
      async () => {
        const failure = state.status === 'failed' ? state.failure : null;
        const settled = await this.records.settle(op.scope, payment.id, { status: state.status, failureCode: failure });
        if (!settled) throw settledByAnother();
        if (failure && failure !== 'processing_error') throw new PaymentDeclinedException(failure, settled.id);
        if (settled.order_id) await this.orders.markPaid(op.scope, settled.order_id);
        return toPaymentResponse(settled);
      },
      { location: (p) => `/payments/${p.id}` },
    );
  }
}
