import { Inject, Injectable } from '@nestjs/common';
import { Page, PageQueryDto, keysetPage } from '../../http/pagination';
import { problems } from '../../http/problem';
import type { AppConfig } from '../../config/config';
import { APP_CONFIG } from '../../config/config.module';
import { cardNetworkIsSimulator } from '../../config/production';
import { Resumes } from 'safe-retries';
import { CardNetwork, IntentState } from '../card-network/card-network';
import { CreatePaymentDto, isSimulatorFaultSource } from '../model/dto/create-payment.dto';
import { PaymentResponse } from '../model/dto/payment.response';
import { ATTENTION, ATTENTION_HOLD_MS, OperationAttention, STUCK_BOUND_MS } from '../attention/operation-attention';
import { FAILED_BY_OPERATOR, INTENT, PAYMENT_OPERATION, PaymentOperation, isUnknownOutcome, networkKeys, settledByAnother } from '../model/payment-operations';
import { FailedByOperatorException, RequiresAttentionException } from '../model/payments.errors';
import { PaymentRow, PaymentsRepository } from '../model/payments.repository';
import { PaymentCharge } from './payment-charge';
import { PaymentFinish } from './payment-finish';
import { PaymentRecords } from '../model/payment-records';
import { PaymentStart } from './payment-start';
import { toPaymentResponse, toRefundResponse } from '../model/payment-response';

/**
 * The rules of payments. A payment reaches the card network, so it runs in
 * atomic phases (PhasedOperation), and the card network is believed only about
 * the call it answers (docs/reliability.md has the full table).
 *
 * A payment: Start (validate, reserve the order, payment 'processing') ->
 * create an UNCONFIRMED PaymentIntent (it charges nothing) -> record its id
 * (recovery point INTENT) -> confirm it -> Finish. Any later attempt, the
 * recovery job or a webhook resumes from the last point: before INTENT it
 * creates the intent again (no intent was ever confirmed, so nothing can have
 * been charged); from INTENT on it asks the network about that intent and acts
 * on its status, so a resume of any age, inside or past the network's key
 * window, never makes a second charge. Before INTENT, a refusal of a payment's
 * parameter (the source, the amount, the currency) ends it: nothing was ever
 * confirmed, so nothing was charged (400, the key released, the order payable);
 * so does any other 400 of the create (502). The proof is our own order of
 * calls: an intent is confirmed only once its id is recorded (INTENT), so a
 * payment before INTENT was never confirmed, whatever the network did with an
 * earlier create.
 *
 * A payment still unknown STUCK_BOUND_MS after Start is not retried on its
 * own any more: before INTENT it is released the same way; from INTENT on it
 * is handed to a person (OperationAttention, `requires_attention`, its order
 * still reserved) until an operator's decision or the network's event.
 *
 * Each state a payment reaches and keeps (succeeded, failed,
 * requires_attention) records its event in the phase that writes it.
 */
@Injectable()
export class PaymentsService {
  /** The simulator's fault test methods are sources only while it is the card network. */
  private readonly acceptsFaultSources: boolean;

  constructor(
    private readonly payments: PaymentsRepository,
    private readonly starter: PaymentStart,
    private readonly charge: PaymentCharge,
    private readonly finish: PaymentFinish,
    private readonly cardNetwork: CardNetwork,
    private readonly attention: OperationAttention,
    private readonly records: PaymentRecords,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.acceptsFaultSources = cardNetworkIsSimulator(config);
  }

  async create(clientId: string, dto: CreatePaymentDto, op: PaymentOperation): Promise<PaymentResponse> {
    if (op.recoveryPoint !== null) {
      const resumed = await this.resumePayment(op);
      if (resumed) return resumed;
      // Still with a person: the retry is told so (nothing stored; the key answers once they decide).
      throw new RequiresAttentionException('payment', op.state!.payment_id, op.state!.attention_id!, ATTENTION_HOLD_MS / 1000);
    }
    if (!this.acceptsFaultSources && isSimulatorFaultSource(dto.source)) {
      // Before any recovery point: nothing is stored and the key is released.
      throw problems.validationFailed([{ field: 'source', messages: ['source is a test method of the card network simulator, which is not the card network here'] }]);
    }
    const payment = await this.starter.start(op, clientId, dto);
    return this.charge.createAndConfirm(op, payment);
  }


  /**
   * Drives a started payment on from its recovery point (a retry, the recovery
   * job). Undefined: it waits for a person, and its lease is held again.
   */
  @Resumes(PAYMENT_OPERATION)
  private async resumePayment(op: PaymentOperation): Promise<PaymentResponse | undefined> {
    const payment = await this.resumablePayment(op);
    if (op.recoveryPoint === ATTENTION) return this.attended(op, payment);
    try {
      return await this.charge.resumeFromIntent(op, payment);
    } catch (error) {
      if (op.outcome || !isUnknownOutcome(error) || !(await this.attention.pastBound('payment', op.scope, payment.id))) throw error;
      const evidence = `still unknown ${STUCK_BOUND_MS / 3_600_000} h after it started: ${(error as Error).message}`;
      if (op.recoveryPoint !== INTENT) return this.charge.releaseUncharged(op, payment, 'stuck', evidence);
      return this.attention.handOver(op, { operation: 'payment', recordId: payment.id, reason: 'stuck', evidence }, () =>
        this.records.handOver(op.scope, payment.id),
      );
    }
  }

  /**
   * A payment with a person: their decision, applied under the operation's
   * lease; none yet, held again. `fail` moves money only on the network's word
   * about this payment's intent: the intent is canceled first, so nothing can
   * charge it later; if it can no longer be canceled, its state wins (a charge
   * is recorded as succeeded). While the network cannot be asked, the decision
   * waits and the payment keeps its order reserved.
   */
  private async attended(op: PaymentOperation, payment: PaymentRow): Promise<PaymentResponse | undefined> {
    const decided = await this.attention.decisionFor(op);
    if (!decided) return undefined;
    const { row, decision } = decided;
    const intentId = op.state!.intent_id!;
    if (decision === 'reask') return this.charge.resumeFromIntent(op, await this.reopen(op, payment, intentId, row.id, 'reasked'));
    let state: IntentState;
    try {
      state = await op.call(() => this.cardNetwork.cancelIntent(intentId, networkKeys.cancelIntent(payment.id)), 'card_network.cancel_intent');
    } catch (error) {
      return this.attention.waitForNetwork(op, row, error);
    }
    if (state.status !== 'failed') return this.finish.conclude(op, await this.reopen(op, payment, intentId, row.id, 'found_at_network'), state);
    return op.finish(async () => {
      if (!(await this.records.failByOperator(op.scope, payment.id, FAILED_BY_OPERATOR))) throw settledByAnother();
      await this.attention.resolve(op.scope, row, 'failed');
      this.attention.counted('payment', 'failed');
      throw new FailedByOperatorException('payment', payment.id);
    });
  }

  /** The payment is taken back from a person (its hand-over ended as `resolution`) and stands at INTENT again. */
  private async reopen(op: PaymentOperation, payment: PaymentRow, intentId: string, attentionId: string, resolution: string): Promise<PaymentRow> {
    await op.checkpoint(
      INTENT,
      async () => {
        if (!(await this.payments.movePayment(op.scope, payment.id, 'requires_attention', 'processing'))) throw settledByAnother();
        await this.attention.resolve(op.scope, { id: attentionId }, resolution);
      },
      () => ({ payment_id: payment.id, intent_id: intentId }),
    );
    this.attention.counted('payment', resolution);
    return { ...payment, status: 'processing' };
  }

  private async resumablePayment(op: PaymentOperation): Promise<PaymentRow> {
    const payment = op.state && (await this.payments.find(op.scope, op.state.payment_id));
    const expected = op.recoveryPoint === ATTENTION ? 'requires_attention' : 'processing';
    if (!payment || payment.status !== expected) {
      throw new Error(`cannot resume payment ${op.state?.payment_id}: ${payment ? payment.status : 'missing'}`);
    }
    return payment;
  }

  /**
   * A card network webhook about a payment (the network's word, signed): if the
   * payment is still processing, it is settled as a resume would settle it, in
   * the operation `op` taken over from its key. Never moves a settled payment.
   */
  async settleFromNetwork(op: PaymentOperation, paymentId: string, intentId: string, state: IntentState): Promise<void> {
    let payment = await this.payments.find(op.scope, paymentId);
    if (!payment || (payment.status !== 'processing' && payment.status !== 'requires_attention') || payment.network_charge_id !== intentId) return;
    // A processing error releases the payment after its intent is canceled: that call is a resume's,
    // made with no transaction open, not this event's (the recovery job or a retry makes it).
    if (state.status === 'requires_confirmation' || state.status === 'processing' || (state.status === 'failed' && state.failure === 'processing_error')) return;
    try {
      if (op.recoveryPoint === ATTENTION && op.state?.attention_id) payment = await this.reopen(op, payment, intentId, op.state.attention_id, 'network_event');
      await this.finish.conclude(op, payment, state);
    } catch (error) {
      // A stored business outcome (a decline) or a release is how this ends, not a failure of the webhook.
      if (!op.outcome) throw error;
    }
  }

  /** A payment still processing or with a person (what a webhook may settle), with its Idempotency-Key. */
  async pendingPayment(clientId: string, id: string): Promise<{ idempotency_key: string | null } | undefined> {
    const payment = await this.payments.find(clientId, id);
    return payment?.status === 'processing' || payment?.status === 'requires_attention' ? payment : undefined;
  }

  async get(clientId: string, id: string): Promise<PaymentResponse> {
    const row = await this.payments.find(clientId, id);
    if (!row) throw problems.notFound(`No payment ${id}.`);
    const refunds = await this.payments.refunds(clientId, id);
    return { ...toPaymentResponse(row), refunds: refunds.map(toRefundResponse) };
  }

  list(clientId: string, query: PageQueryDto): Promise<Page<PaymentResponse>> {
    return keysetPage(
      query,
      {
        exists: async (id) => (await this.payments.find(clientId, id)) !== undefined,
        fetch: (limit, afterId) => this.payments.listPage(clientId, limit, afterId),
      },
      toPaymentResponse,
    );
  }
}
