import { Injectable } from '@nestjs/common';
import { EventsService } from '../../events/events.service';
import { IntentState } from '../card-network/card-network';
import { toPaymentResponse } from './payment-response';
import { DeclineReason } from './payments.errors';
import { PaymentRow, PaymentsRepository } from './payments.repository';

/** A payment's final state, as the network's word about its intent settles it. */
export type PaymentSettlement = { status: 'succeeded' } | { status: 'failed'; failure: DeclineReason };

/**
 * What the network's word about a payment's intent settles; undefined while
 * nothing is final: not confirmed yet, processing, or a processing error (that
 * intent could still be confirmed, so it is canceled before anything is
 * concluded).
 */
export function settlementOf(state: IntentState): PaymentSettlement | undefined {
  if (state.status === 'succeeded') return { status: 'succeeded' };
  if (state.status === 'failed' && state.failure !== 'processing_error') return { status: 'failed', failure: state.failure };
  return undefined;
}

/**
 * Each state a payment reaches and keeps, written with the event that
 * announces it, in the caller's transaction: no service moves a payment
 * without its event, or records an event without the move.
 */
@Injectable()
export class PaymentRecords {
  constructor(
    private readonly payments: PaymentsRepository,
    private readonly events: EventsService,
  ) {}

  /** `processing` -> succeeded or failed, as the network said; undefined when it was no longer processing. */
  async settle(clientId: string, id: string, to: PaymentSettlement): Promise<PaymentRow | undefined> {
    const settled = await this.payments.settle(clientId, id, { status: to.status, failureCode: to.status === 'failed' ? to.failure : null });
    if (settled) await this.events.record(clientId, settled.status === 'succeeded' ? 'payment.succeeded' : 'payment.failed', toPaymentResponse(settled));
    return settled;
  }

  /** `processing` -> requires_attention; false when it was no longer processing. */
  async handOver(clientId: string, id: string): Promise<boolean> {
    if (!(await this.payments.movePayment(clientId, id, 'processing', 'requires_attention'))) return false;
    await this.events.record(clientId, 'payment.requires_attention', toPaymentResponse((await this.payments.find(clientId, id))!));
    return true;
  }

  /** `requires_attention` -> failed by an operator (`failureCode`); undefined when it was no longer with a person. */
  async failByOperator(clientId: string, id: string, failureCode: string): Promise<PaymentRow | undefined> {
    const failed = await this.payments.failByOperator(clientId, id, failureCode);
    if (failed) await this.events.record(clientId, 'payment.failed', toPaymentResponse(failed));
    return failed;
  }

  /** The network contradicts the payment's final state: the record stays, the client is told. */
  contradicted(clientId: string, payment: PaymentRow): Promise<void> {
    return this.events.record(clientId, 'payment.contradicted', toPaymentResponse(payment));
  }
}
