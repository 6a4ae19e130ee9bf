import { Injectable, Logger } from '@nestjs/common';
import { problems } from '../../http/problem';
import { Resumes } from 'safe-retries';
import { CardNetwork, CardNetworkRefusedError, RefundState, UnknownNetworkObjectError } from '../card-network/card-network';
import { CreateRefundDto } from '../model/dto/create-payment.dto';
import { RefundResponse } from '../model/dto/payment.response';
import { ATTENTION, ATTENTION_HOLD_MS, OperationAttention, STUCK_BOUND_MS } from '../attention/operation-attention';
import {
  FAILED_BY_OPERATOR,
  NetworkCalls,
  REFUND_OPERATION,
  RefundOperation,
  STARTED,
  isUnknownOutcome,
  networkKeys,
  settledByAnother,
  unknownOutcome,
} from '../model/payment-operations';
import {
  CardNetworkFailedException,
  FailedByOperatorException,
  PaymentNotRefundableException,
  RefundExceedsPaymentException,
  RequiresAttentionException,
} from '../model/payments.errors';
import { PaymentsRepository, RefundRow } from '../model/payments.repository';
import { toRefundResponse } from '../model/payment-response';
import { RefundRecords, RefundSettlement } from '../model/refund-records';

/**
 * The rules of refunds, with the network's states: a refund is reserved
 * (`processing`: Start, the amount counted against the payment at once), then
 * created at the network, then recorded as the network answers it: `pending`
 * or `succeeded` (201, stored), or released when the network's word about this
 * refund is that it failed. A pending refund is settled later by the network's
 * webhooks or the settlement job (RefundSettlementJob); a refund that fails
 * after it was answered (`refund.failed`) gives its amount back to the payment.
 *
 * Only the network's verdict about THIS refund releases it. A refusal answers
 * only the send it answers: on the first attempt's only send it proves nothing
 * was refunded (nothing else was ever sent under the refund's network key); on
 * an SDK resend or a later attempt (a retry, the recovery job) an earlier send
 * may still be in flight, so it is an unknown outcome (503, kept), and a later
 * resume looks the refund up and creates it again with the same network key.
 *
 * A resume that the network refuses definitively (a 400) while its list of
 * the payment's refunds has none of ours, or that is still unknown
 * STUCK_BOUND_MS after the refund was reserved, hands the refund to a person
 * (OperationAttention): `requires_attention`, its amount still reserved, until
 * an operator's decision (mark it failed, or ask the network again) is applied
 * by the operation's next attempt, or the network's own event names it.
 */
@Injectable()
export class RefundsService {
  private readonly logger = new Logger('Refunds');

  constructor(
    private readonly payments: PaymentsRepository,
    private readonly cardNetwork: CardNetwork,
    private readonly network: NetworkCalls,
    private readonly attention: OperationAttention,
    private readonly records: RefundRecords,
  ) {}

  async refund(clientId: string, paymentId: string, dto: CreateRefundDto, op: RefundOperation): Promise<RefundResponse> {
    if (op.recoveryPoint !== null) {
      const resumed = await this.resume(op);
      if (resumed) return resumed;
      // Still with a person: the retry is told so (nothing stored; the key answers once they decide).
      throw new RequiresAttentionException('refund', op.state!.refund_id, op.state!.attention_id!, ATTENTION_HOLD_MS / 1000);
    }
    const refund = await op.checkpoint(STARTED, () => this.reserve(clientId, paymentId, dto, op.key), (r) => ({ refund_id: r.id }));
    return this.make(op, refund, { firstContact: true });
  }

  /** Refunds serialise on the payment's row lock; reserved refunds count, so the total never exceeds the payment. */
  private async reserve(clientId: string, paymentId: string, dto: CreateRefundDto, idempotencyKey: string): Promise<RefundRow> {
    const payment = await this.payments.findForUpdate(clientId, paymentId);
    if (!payment) throw problems.notFound(`No payment ${paymentId}.`);
    if (payment.status !== 'succeeded') throw new PaymentNotRefundableException(paymentId);
    const remaining = Number(payment.amount) - Number(payment.amount_refunded);
    const amount = dto.amount ?? remaining;
    if (amount <= 0 || amount > remaining) throw new RefundExceedsPaymentException(paymentId, remaining);
    return this.payments.reserveRefund(clientId, paymentId, amount, idempotencyKey);
  }

  /**
   * Drives a reserved refund on from its recovery point (a retry, the recovery
   * job). Undefined: it waits for a person, and its lease is held again.
   */
  @Resumes(REFUND_OPERATION)
  private async resume(op: RefundOperation): Promise<RefundResponse | undefined> {
    const refund = op.state && (await this.payments.findRefund(op.scope, op.state.refund_id));
    const expected = op.recoveryPoint === ATTENTION ? 'requires_attention' : 'processing';
    if (!refund || refund.status !== expected) {
      throw new Error(`cannot resume refund ${op.state?.refund_id}: ${refund ? refund.status : 'missing'}`);
    }
    if (op.recoveryPoint === ATTENTION) return this.attended(op, refund);
    try {
      return await this.make(op, refund, { firstContact: false });
    } catch (error) {
      if (op.outcome || !isUnknownOutcome(error) || !(await this.attention.pastBound('refund', op.scope, refund.id))) throw error;
      return this.handOver(op, refund, 'stuck', `still unknown ${STUCK_HOURS} h after it was reserved: ${(error as Error).message}`);
    }
  }

  /** A refund with a person: their decision, applied under the operation's lease; none yet, held again. */
  private async attended(op: RefundOperation, refund: RefundRow): Promise<RefundResponse | undefined> {
    const decided = await this.attention.decisionFor(op);
    if (!decided) return undefined;
    const { row, decision } = decided;
    if (decision === 'reask') {
      await this.reopen(op, refund, row, 'reasked');
      return this.make(op, { ...refund, status: 'processing' }, { firstContact: false });
    }
    // Marked failed only on the network's word: its list of the payment's refunds, asked now, has none of ours.
    const intentId = await this.intentOf(op.scope, refund);
    let found: RefundState | null;
    try {
      found = await op.call(() => this.cardNetwork.findRefund(intentId, { key: 'refund_id', value: refund.id }), 'card_network.find_refund');
    } catch (error) {
      return this.attention.waitForNetwork(op, row, error);
    }
    if (found) {
      await this.reopen(op, refund, row, 'found_at_network');
      return this.conclude(op, { ...refund, status: 'processing' }, found);
    }
    return op.finish(async () => {
      if (!(await this.records.failByOperator(op.scope, refund.id, FAILED_BY_OPERATOR))) throw settledByAnother();
      await this.attention.resolve(op.scope, row, 'failed');
      this.attention.counted('refund', 'failed');
      throw new FailedByOperatorException('refund', refund.id);
    });
  }

  /** The refund is taken back from a person (its hand-over ended as `resolution`) and stands at STARTED again. */
  private async reopen(op: RefundOperation, refund: RefundRow, row: { id: string }, resolution: string): Promise<void> {
    await op.checkpoint(
      STARTED,
      async () => {
        if (!(await this.payments.moveRefundAttention(op.scope, refund.id, 'requires_attention', 'processing'))) throw settledByAnother();
        await this.attention.resolve(op.scope, row, resolution);
      },
      () => ({ refund_id: refund.id }),
    );
    this.attention.counted('refund', resolution);
  }

  private handOver(op: RefundOperation, refund: RefundRow, reason: 'refused' | 'stuck', evidence: string): Promise<never> {
    return this.attention.handOver(op, { operation: 'refund', recordId: refund.id, reason, evidence }, () => this.records.handOver(op.scope, refund.id));
  }

  /**
   * On a resume, the network is asked first whether an earlier attempt made the
   * refund (found by our metadata), so a resume past the network's key window
   * never refunds twice.
   */
  private async make(op: RefundOperation, refund: RefundRow, { firstContact }: { firstContact: boolean }): Promise<RefundResponse> {
    const intentId = await this.intentOf(op.scope, refund);
    const lookUp = () =>
      this.network.ask(op, { kind: 'refund', ids: { refund_id: refund.id, intent_id: intentId } }, 'card_network.find_refund', () =>
        this.cardNetwork.findRefund(intentId, { key: 'refund_id', value: refund.id }),
      );
    if (!firstContact) {
      const found = await lookUp();
      if (found) return this.conclude(op, refund, found);
    }
    let made: RefundState;
    try {
      made = await op.call(() =>
        this.cardNetwork.createRefund({
          intentId,
          amount: Number(refund.amount),
          idempotencyKey: networkKeys.refund(refund.id),
          metadata: { refund_id: refund.id, payment_id: refund.payment_id, client_id: op.scope },
        }),
        'card_network.create_refund',
      );
    } catch (error) {
      if (!(error instanceof CardNetworkRefusedError)) throw unknownOutcome(error);
      if (firstContact && error.firstSend) {
        // The only send ever made under this refund's network key was refused: nothing was refunded.
        await op.release(() => this.payments.cancelRefund(op.scope, refund.id));
        throw new CardNetworkFailedException('refund');
      }
      // A resend or a later attempt: an earlier send may have refunded, and may still be in flight.
      let found: RefundState | null | undefined;
      try {
        found = await lookUp();
      } catch (lookupError) {
        if (op.outcome) throw lookupError;
      }
      if (found) return this.conclude(op, refund, found);
      if (found === null && error.definitive) {
        // The network refuses this refund as it stands and lists none of ours: it cannot
        // tell whether the earlier send acted, and will refuse every resume alike.
        return this.handOver(op, refund, 'refused', `${error.message}; the card network lists no refund of ours for intent ${intentId}`);
      }
      throw unknownOutcome(error);
    }
    return this.conclude(op, refund, made);
  }

  /** The network's word about this refund, recorded: released only when it says the refund failed. */
  private async conclude(op: RefundOperation, refund: RefundRow, state: RefundState): Promise<RefundResponse> {
    if (state.status === 'failed') {
      await op.release(() => this.payments.cancelRefund(op.scope, refund.id));
      throw new CardNetworkFailedException('refund');
    }
    const status = state.status;
    return op.finish(
      async () => {
        const settled = await this.records.answered(op.scope, refund.id, state.refundId, status);
        if (!settled) throw settledByAnother();
        return toRefundResponse(settled);
      },
      { location: (r) => `/payments/${r.payment_id}` },
    );
  }

  /**
   * A webhook about a refund still `processing`, or with a person: concluded
   * from the network's (verified) word, in its operation (a hand-over ends).
   */
  async concludeFromNetwork(op: RefundOperation, refundId: string, state: RefundState): Promise<void> {
    const refund = await this.payments.findRefund(op.scope, refundId);
    if (!refund || (refund.status !== 'processing' && refund.status !== 'requires_attention')) return;
    try {
      if (op.recoveryPoint === ATTENTION && op.state?.attention_id) await this.reopen(op, refund, { id: op.state.attention_id }, 'network_event');
      await this.conclude(op, { ...refund, status: 'processing' }, state);
    } catch (error) {
      if (!op.outcome) throw error;
    }
  }

  /** A refund the network answered for moves on (pending -> succeeded; pending or succeeded -> failed, amount given back). */
  async settle(clientId: string, refundId: string, networkRefundId: string, to: RefundSettlement): Promise<boolean> {
    const moved = await this.records.settle(clientId, refundId, networkRefundId, to);
    if (moved) this.logger.log(`refund ${refundId} (${networkRefundId}) ${moved.status}`);
    return moved !== undefined;
  }

  /**
   * The refund an event of the network is about, if it is ours: the event must
   * name our refund (metadata), the intent of its payment, and, once we know
   * the refund's network id, that id. The network is asked about the event's
   * refund first whenever the event would decide something the event alone
   * should not: a failure, or which network refund a refund still `processing`
   * is (its answer must name our refund, our intent and our amount). Null:
   * nothing of ours to act on.
   */
  async verifiedEvent(
    clientId: string,
    refundId: string,
    event: RefundState,
  ): Promise<{ refund: RefundRow; state: RefundState } | null> {
    const refund = await this.payments.findRefund(clientId, refundId);
    if (!refund) return null;
    const payment = await this.payments.find(clientId, refund.payment_id);
    if (!payment?.network_charge_id || payment.network_charge_id !== event.intentId) return null;
    if (refund.network_refund_id !== null && refund.network_refund_id !== event.refundId) return null;
    // The event alone would decide a failure, which network refund ours is, or contradict a failed record.
    const ask = event.status === 'failed' || refund.network_refund_id === null || refund.status === 'failed';
    const state = ask ? await this.cardNetwork.retrieveRefund(event.refundId).catch(unknownRefund) : event;
    if (!state) return null;
    if (
      state.refundId !== event.refundId ||
      state.intentId !== payment.network_charge_id ||
      state.metadata.refund_id !== refund.id ||
      state.amount !== Number(refund.amount)
    ) {
      return null;
    }
    return { refund, state };
  }

  private async intentOf(clientId: string, refund: RefundRow): Promise<string> {
    const payment = await this.payments.find(clientId, refund.payment_id);
    const intentId = payment?.network_charge_id;
    if (!intentId) throw new Error(`payment ${refund.payment_id} has no charge at the card network`);
    return intentId;
  }
}

const STUCK_HOURS = STUCK_BOUND_MS / 3_600_000;

/** A refund the network does not know is none of ours: nothing to act on. */
function unknownRefund(error: unknown): null {
  if (error instanceof UnknownNetworkObjectError) return null;
  throw error;
}
