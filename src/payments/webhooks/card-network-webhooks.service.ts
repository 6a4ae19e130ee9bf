import { Injectable, Logger } from '@nestjs/common';
import { ProblemException } from '../../common/problem';
import { IdempotencyRecovery, IdempotentConsumer } from '../../idempotency';
import { CardNetwork, InvalidWebhookError, NetworkEvent } from '../card-network/card-network';
import { PaymentOperation, PaymentsService, RefundOperation } from '../payments.service';

/** The source under which the network's event ids are claimed (IdempotentConsumer). */
export const CARD_NETWORK_EVENTS = 'card-network';

export type WebhookReceipt = { received: true; effect: 'settled' | 'duplicate' | 'nothing_to_do' };

/**
 * The card network's webhooks, consumed the idempotent-consumer way: each
 * event is verified (its signature over the exact bytes, at most 5 minutes
 * old), then its id is claimed in the same transaction as its effect, so a
 * repeat or a concurrent duplicate delivery is answered 2xx with no second
 * effect (a duplicate waits on the first one's claim, then sees it).
 *
 * The effect: a payment or refund still `processing` is settled from the
 * event, the network's own word about that object, in its client's operation,
 * taken over from its Idempotency-Key, so the final response is stored and the
 * client's late retry replays it. A settled record is never moved (an event
 * that arrives late or out of order changes nothing). While the client's own
 * request still holds the key, the event is answered 409 and the network
 * delivers it again later.
 */
@Injectable()
export class CardNetworkWebhooks {
  private readonly logger = new Logger('CardNetworkWebhooks');

  constructor(
    private readonly cardNetwork: CardNetwork,
    private readonly payments: PaymentsService,
    private readonly recovery: IdempotencyRecovery,
    private readonly consumer: IdempotentConsumer,
  ) {}

  async receive(payload: Buffer | undefined, signature: string | undefined): Promise<WebhookReceipt> {
    const event = this.verify(payload, signature);
    if (event.object === 'other') return { received: true, effect: 'nothing_to_do' };
    const target = await this.targetOf(event);
    if (!target) return { received: true, effect: 'nothing_to_do' };

    const outcome = await this.consumer.process(CARD_NETWORK_EVENTS, event.id, async () => {
      const taken = await this.recovery.takeOver(target.scope, target.key, (op) =>
        event.object === 'payment_intent'
          ? this.payments.settleFromNetwork(op as PaymentOperation, target.id, event.intentId, event.state)
          : this.payments.settleRefundFromNetwork(op as RefundOperation, target.id, event.state),
      );
      // The client's request (or the recovery job) is at work on it: deliver again later.
      if (!taken.taken) throw inProgress();
    });
    if (!outcome.processed) return { received: true, effect: 'duplicate' };
    this.logger.log(`${event.type} ${event.id}: settled`);
    return { received: true, effect: 'settled' };
  }

  private verify(payload: Buffer | undefined, signature: string | undefined): NetworkEvent {
    if (!payload || !signature) throw invalidSignature('The Stripe-Signature header and the raw body are required.');
    try {
      return this.cardNetwork.parseWebhook(payload, signature);
    } catch (error) {
      if (error instanceof InvalidWebhookError) throw invalidSignature('The signature does not verify, or is too old.');
      throw error;
    }
  }

  /** The processing payment or refund the event is about, with its client's key; null when there is nothing to settle. */
  private async targetOf(event: NetworkEvent): Promise<{ scope: string; key: string; id: string } | null> {
    const scope = event.metadata.client_id;
    if (!scope || event.object === 'other') return null;
    const id = event.object === 'payment_intent' ? event.metadata.payment_id : event.metadata.refund_id;
    if (!id) return null;
    const found = event.object === 'payment_intent' ? await this.payments.pendingPayment(scope, id) : await this.payments.pendingRefund(scope, id);
    return found?.idempotency_key ? { scope, key: found.idempotency_key, id } : null;
  }
}

function invalidSignature(detail: string): ProblemException {
  return new ProblemException({ status: 400, code: 'invalid_webhook_signature', title: 'Invalid Webhook Signature', detail });
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
