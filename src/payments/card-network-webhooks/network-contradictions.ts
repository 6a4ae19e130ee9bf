import { Injectable } from '@nestjs/common';
import { CardNetwork, IntentState, RefundState } from '../card-network/card-network';
import { OperationAttention } from '../attention/operation-attention';
import { PaymentRecords } from '../model/payment-records';
import { PaymentRow, PaymentsRepository, RefundRow } from '../model/payments.repository';
import { RefundRecords } from '../model/refund-records';

/** A final record and the network's word that contradicts it. */
export type Contradiction =
  | { operation: 'payment'; record: PaymentRow; state: IntentState }
  | { operation: 'refund'; record: RefundRow; state: RefundState };

/** Whether the network's state of a payment's intent contradicts the payment's final status. */
function contradictsPayment(status: PaymentRow['status'], state: IntentState): boolean {
  return (status === 'failed' && state.status === 'succeeded') || (status === 'succeeded' && state.status === 'failed');
}

/**
 * The network's events that contradict a final record: a charge for a payment
 * held failed (an operator's word, or a record made before the network could
 * say), a failure of one held succeeded, a refund the network made or keeps
 * for one held failed. A final record never moves on an event, and such an
 * event is never dropped either: it is surfaced for a person (a hand-over
 * `contradicted`, an error log line, `card_network_contradictions_total`) and
 * told to the client (`payment.contradicted`, `refund.contradicted`).
 *
 * An event alone is not believed: events arrive out of order (a failure
 * delivered after the success that followed it), so the network is asked about
 * the object first, with no transaction open, and only its present word counts.
 */
@Injectable()
export class NetworkContradictions {
  constructor(
    private readonly payments: PaymentsRepository,
    private readonly cardNetwork: CardNetwork,
    private readonly attention: OperationAttention,
    private readonly paymentRecords: PaymentRecords,
    private readonly refundRecords: RefundRecords,
  ) {}

  /** The payment's contradiction, if the event's intent is the payment's and the network, asked, contradicts its final status. */
  async ofPayment(clientId: string, paymentId: string, event: { intentId: string; state: IntentState }): Promise<Contradiction | null> {
    const payment = await this.payments.find(clientId, paymentId);
    if (!payment || payment.network_charge_id !== event.intentId || !contradictsPayment(payment.status, event.state)) return null;
    const state = await this.cardNetwork.retrieveIntent(event.intentId);
    return contradictsPayment(payment.status, state) ? { operation: 'payment', record: payment, state } : null;
  }

  /** A refund held failed that the network (asked, see RefundsService.verifiedEvent) has pending or succeeded. */
  ofRefund(refund: RefundRow, state: RefundState): Contradiction | null {
    return refund.status === 'failed' && state.status !== 'failed' ? { operation: 'refund', record: refund, state } : null;
  }

  /** Surfaced, in the event's transaction: the hand-over, the log line, the metric and the client's event. */
  async surface(clientId: string, c: Contradiction): Promise<void> {
    const held = c.operation === 'payment' ? `held ${c.record.status}` : `held failed (${c.record.failure_reason ?? 'no reason'})`;
    const network = c.operation === 'payment' ? `intent ${c.record.network_charge_id} is ${c.state.status}` : `refund ${c.state.refundId} is ${c.state.status}`;
    await this.attention.contradicted(clientId, {
      operation: c.operation,
      recordId: c.record.id,
      key: c.record.idempotency_key,
      evidence: `${held}, but at the card network ${network}`,
    });
    if (c.operation === 'payment') await this.paymentRecords.contradicted(clientId, c.record);
    else await this.refundRecords.contradicted(clientId, c.record);
  }
}
