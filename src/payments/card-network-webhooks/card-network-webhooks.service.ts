import { Injectable, Logger } from '@nestjs/common';
import { ProblemException } from '../../http/problem';
import { IdempotencyRecovery, PhasedOperation, PhasedOperationName } from 'safe-retries';
import { IdempotentConsumer } from 'safe-retries/messages';
import { NetworkEvent } from '../card-network/card-network';
import { Contradiction, NetworkContradictions } from './network-contradictions';
import { PAYMENT_OPERATION, REFUND_OPERATION, unknownOutcome } from '../model/payment-operations';
import { PaymentsService } from '../charges/payments.service';
import { RefundSettlement } from '../model/refund-records';
import { RefundsService } from '../refunds/refunds.service';

/** The source under which the network's event ids are claimed (IdempotentConsumer). */
export const CARD_NETWORK_EVENTS = 'card-network';

/**
 * The events that end a payment at the network. The others (`processing`,
 * `requires_action`, `requires_capture`, `created`) settle nothing: a payment
 * confirmed with `error_on_requires_action` and automatic capture ends only in
 * one of these.
 */
const SETTLING_INTENT_EVENTS: readonly string[] = ['payment_intent.succeeded', 'payment_intent.payment_failed', 'payment_intent.canceled'];

export type WebhookReceipt = { received: true; effect: 'settled' | 'contradicted' | 'duplicate' | 'nothing_to_do' };

type Event<K extends NetworkEvent['object']> = NetworkEvent & { object: K };

/**
 * The card network's webhooks, consumed the idempotent-consumer way: each
 * event, verified (CardNetworkSignature: its signature over the exact bytes,
 * at most 5 minutes old), has its id claimed in the same transaction as its effect, so a
 * repeat or a concurrent duplicate delivery is answered 2xx with no second
 * effect (a duplicate waits on the first one's claim, then sees it).
 *
 * A payment still `processing` is settled from a settling event, the network's
 * own word about that intent, in its client's operation, taken over from its
 * Idempotency-Key, so the final response is stored and the client's late retry
 * replays it. A refund event acts only on the refund it names: our refund (its
 * metadata), the intent of its payment, and its network id once we know it; a
 * `failed` is never taken from the event alone, the network is asked about
 * that refund first (before any transaction opens). A refund still
 * `processing` is concluded in its operation like a payment; one the network
 * has already answered for (pending, succeeded) moves on to succeeded or
 * failed, a failure giving its amount back. A settled record is never moved
 * backwards; an event that contradicts a final record (the network asked
 * first) is surfaced for a person, never dropped (NetworkContradictions).
 * While the client's own request still holds the key, the event is answered
 * 409 and the network delivers it again later.
 */
@Injectable()
export class CardNetworkWebhooks {
  private readonly logger = new Logger('CardNetworkWebhooks');

  constructor(
    private readonly payments: PaymentsService,
    private readonly refunds: RefundsService,
    private readonly recovery: IdempotencyRecovery,
    private readonly consumer: IdempotentConsumer,
    private readonly contradictions: NetworkContradictions,
  ) {}

  /** Acts on a verified event. */
  async receive(event: NetworkEvent): Promise<WebhookReceipt> {
    const effect = event.object === 'payment_intent' ? await this.onIntent(event) : event.object === 'refund' ? await this.onRefund(event) : 'nothing_to_do';
    if (effect === 'settled' || effect === 'contradicted') this.logger.log(`${event.type} ${event.id}: ${effect}`);
    return { received: true, effect };
  }

  private async onIntent(event: Event<'payment_intent'>): Promise<WebhookReceipt['effect']> {
    const scope = event.metadata.client_id;
    const paymentId = event.metadata.payment_id;
    if (!scope || !paymentId || !SETTLING_INTENT_EVENTS.includes(event.type)) return 'nothing_to_do';
    const pending = await this.payments.pendingPayment(scope, paymentId);
    if (!pending) return this.surface(event, await this.contradictions.ofPayment(scope, paymentId, event).catch(asUnknown));
    const key = pending.idempotency_key;
    if (!key) return 'nothing_to_do';
    return this.once(event, () =>
      this.inOperation(PAYMENT_OPERATION, scope, key, (op) => this.payments.settleFromNetwork(op, paymentId, event.intentId, event.state)),
    );
  }

  private async onRefund(event: Event<'refund'>): Promise<WebhookReceipt['effect']> {
    const scope = event.metadata.client_id;
    const refundId = event.metadata.refund_id;
    if (!scope || !refundId) return 'nothing_to_do';
    const verified = await this.refunds.verifiedEvent(scope, refundId, event.state).catch(asUnknown);
    if (!verified) return 'nothing_to_do';
    const { refund, state } = verified;
    if (refund.status === 'failed') return this.surface(event, this.contradictions.ofRefund(refund, state));
    if (refund.status === 'processing' || refund.status === 'requires_attention') {
      const key = refund.idempotency_key;
      if (!key) return 'nothing_to_do';
      return this.once(event, () => this.inOperation(REFUND_OPERATION, scope, key, (op) => this.refunds.concludeFromNetwork(op, refund.id, state)));
    }
    if ((refund.status !== 'pending' && refund.status !== 'succeeded') || state.status === 'pending' || state.status === refund.status) return 'nothing_to_do';
    const to: RefundSettlement = state.status === 'succeeded' ? { status: 'succeeded' } : { status: 'failed', failureReason: state.failureReason ?? null };
    return this.once(event, () => this.refunds.settle(scope, refund.id, state.refundId, to));
  }

  /** The effect, once per event id, in the same transaction as the id's record. */
  private async once(event: NetworkEvent, effect: () => Promise<unknown>, named: 'settled' | 'contradicted' = 'settled'): Promise<WebhookReceipt['effect']> {
    const outcome = await this.consumer.process(CARD_NETWORK_EVENTS, event.id, effect);
    return outcome.processed ? named : 'duplicate';
  }

  /** A contradiction of a final record, surfaced once per event id; none: nothing to do. */
  private surface(event: NetworkEvent, contradiction: Contradiction | null): Promise<WebhookReceipt['effect']> | 'nothing_to_do' {
    if (!contradiction) return 'nothing_to_do';
    return this.once(event, () => this.contradictions.surface(event.metadata.client_id, contradiction), 'contradicted');
  }

  /** Runs `work` in the client's operation at `key`, taken over; 409 while its own request holds it. */
  private async inOperation<S>(operation: PhasedOperationName<S>, scope: string, key: string, work: (op: PhasedOperation<S>) => Promise<void>): Promise<void> {
    const taken = await this.recovery.takeOver(operation, scope, key, work);
    if (!taken.taken) throw inProgress();
  }
}

/** The network could not be asked: the event is answered 503 and delivered again later. */
function asUnknown(error: unknown): never {
  throw unknownOutcome(error);
}

function inProgress(): ProblemException {
  return new ProblemException({
    status: 409,
    code: 'operation_in_progress',
    title: 'Operation In Progress',
    detail: 'The payment or refund is being worked on by its own request; deliver the event again later.',
    headers: { 'Retry-After': '1' },
  });
}
