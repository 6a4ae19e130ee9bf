import { Injectable } from '@nestjs/common';
import { EventsService } from '../../events/events.service';
import { toPaymentResponse } from './payment-response';
import { PaymentRow, PaymentsRepository } from './payments.repository';

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
  async settle(clientId: string, id: string, outcome: { status: 'succeeded' | 'failed'; failureCode: string | null }): Promise<PaymentRow | undefined> {
    const settled = await this.payments.settle(clientId, id, outcome);
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
