import { Injectable } from '@nestjs/common';
import { CardNetwork, IntentState } from '../card-network/card-network';
import { PaymentResponse } from '../model/dto/payment.response';
import { NetworkCalls, PaymentOperation, intentObject, networkKeys } from '../model/payment-operations';
import { CardNetworkFailedException } from '../model/payments.errors';
import { PaymentRow, PaymentsRepository } from '../model/payments.repository';
import { PaymentFinish } from './payment-finish';

/**
 * A payment's confirm phase, from INTENT on: the network's word about the one
 * intent it may have charged, gathered in one place and handed to
 * PaymentFinish. A fresh payment confirms its intent (the one call that
 * charges, on an intent whose id is recorded); a resume of any age asks the
 * network about that intent first and confirms it only if it never was, so it
 * never makes a second charge. Any call left unanswered leaves the outcome
 * unknown (NetworkCalls).
 */
@Injectable()
export class PaymentConfirm {
  constructor(
    private readonly payments: PaymentsRepository,
    private readonly cardNetwork: CardNetwork,
    private readonly network: NetworkCalls,
    private readonly finish: PaymentFinish,
  ) {}

  /** The intent this attempt has just created and recorded: confirmed. */
  confirm(op: PaymentOperation, payment: PaymentRow, intentId: string): Promise<PaymentResponse> {
    return this.drive(op, payment, intentId, { status: 'requires_confirmation' });
  }

  /** The recorded intent of a resumed payment: the network's own word about it first. */
  resume(op: PaymentOperation, payment: PaymentRow, intentId: string): Promise<PaymentResponse> {
    return this.drive(op, payment, intentId);
  }

  /**
   * From what this attempt knows of the intent (nothing, on a resume) to the
   * network's word, recorded. A processing error does not end an intent: it
   * could still be confirmed, so it is canceled first, and the cancel's answer
   * is the network's latest word (a charge made since is recorded). Canceled,
   * it was not charged: nothing is kept and a retry pays anew (502).
   */
  private async drive(op: PaymentOperation, payment: PaymentRow, intentId: string, known?: IntentState): Promise<PaymentResponse> {
    const ask = (name: string, call: () => Promise<IntentState>) => this.network.ask(op, intentObject(payment.id, intentId), name, call);
    let state = known ?? (await ask('card_network.retrieve_intent', () => this.cardNetwork.retrieveIntent(intentId)));
    if (state.status === 'requires_confirmation') {
      state = await ask('card_network.confirm_intent', () => this.cardNetwork.confirmIntent(intentId, networkKeys.confirmIntent(payment.id)));
    }
    if (state.status === 'failed' && state.failure === 'processing_error') {
      state = await ask('card_network.cancel_intent', () => this.cardNetwork.cancelIntent(intentId, networkKeys.cancelIntent(payment.id)));
      if (state.status === 'failed') {
        await op.release(() => this.payments.deleteProcessing(op.scope, payment.id));
        throw new CardNetworkFailedException('charge');
      }
    }
    return this.finish.conclude(op, payment, state);
  }
}
