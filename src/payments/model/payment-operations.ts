import { Injectable, Logger } from '@nestjs/common';
import { Counter } from 'prom-client';
import { LeaseLostError, PhasedOperation, phasedOperation } from 'safe-retries';
import { MetricsService } from '../../metrics/metrics.service';
import { CardNetworkRefusedError, CardNetworkUnavailableError, UnknownNetworkObjectError } from '../card-network/card-network';
import { CardNetworkUnavailableException, PaymentProcessingException, UnknownNetworkObjectException } from './payments.errors';

/** What a payment's phases save with their recovery points. */
export interface PaymentState {
  payment_id: string;
  /** The card network's PaymentIntent, from the INTENT point on. */
  intent_id?: string;
  /** The hand-over (operation_attention), at the ATTENTION point. */
  attention_id?: string;
}

/** What a refund's Start phase saves with its recovery point. */
export interface RefundState {
  refund_id: string;
  /** The hand-over (operation_attention), at the ATTENTION point. */
  attention_id?: string;
}

/**
 * The phased operations: their routes run them (`@Idempotent({ phased })`), the
 * services resume them (`@Resumes()`), webhooks take them over; the names are
 * what the recovery job finds an abandoned one by.
 */
export const PAYMENT_OPERATION = phasedOperation<PaymentState>('payments.create');
export const REFUND_OPERATION = phasedOperation<RefundState>('payments.refund');
export type PaymentOperation = PhasedOperation<PaymentState>;
export type RefundOperation = PhasedOperation<RefundState>;
/** Start committed: the payment (or refund) is recorded as processing. */
export const STARTED = 'started';
/** The PaymentIntent's id is recorded: from here on, only that intent can ever be charged. */
export const INTENT = 'intent';

/** The failure_code (payment) or failure_reason (refund) of an operation an operator marked failed. */
export const FAILED_BY_OPERATOR = 'failed_by_operator';

/** Our keys at the card network: unique across clients, the same on every attempt and resume. */
export const networkKeys = {
  createIntent: (paymentId: string) => `payment_${paymentId}`,
  confirmIntent: (paymentId: string) => `payment_${paymentId}_confirm`,
  cancelIntent: (paymentId: string) => `payment_${paymentId}_cancel`,
  refund: (refundId: string) => `refund_${refundId}`,
};

/**
 * How long an operation whose object the card network does not know (404) is
 * left alone before it is tried again: long enough that neither the recovery
 * job nor a client's retries ask the network over and over, short enough that
 * an operator's fix (the account's API key) is picked up within the hour.
 */
export const UNKNOWN_OBJECT_HOLD_MS = 60 * 60_000;

/** How the network's calls name a payment's intent in a log line. */
export function intentObject(paymentId: string, intentId: string): { kind: 'intent'; ids: Record<string, string> } {
  return { kind: 'intent', ids: { payment_id: paymentId, intent_id: intentId } };
}

/**
 * A record this operation started is no longer processing: only a later owner
 * of the key (a retry, the recovery job, a webhook) settles it, so this
 * attempt's lease was lost (409 idempotency_lease_lost, nothing committed).
 */
export function settledByAnother(): LeaseLostError {
  return new LeaseLostError();
}

/** Whether an attempt ended with the operation's outcome still unknown (503, kept for the next attempt). */
export function isUnknownOutcome(error: unknown): boolean {
  return error instanceof CardNetworkUnavailableException || error instanceof PaymentProcessingException;
}

/** An answer that does not settle the operation: 503, key and recovery point kept. */
export function unknownOutcome(error: unknown): unknown {
  return error instanceof CardNetworkUnavailableError || error instanceof CardNetworkRefusedError ? new CardNetworkUnavailableException() : error;
}

/**
 * Calls to the card network made by a phased operation, for payments and
 * refunds alike: each under the operation's lease (PhasedOperation.call), any
 * error an unknown outcome, and an object the network does not know held off
 * with a log line and a metric for an operator.
 */
@Injectable()
export class NetworkCalls {
  private readonly logger = new Logger('CardNetwork');
  private readonly unknownObjects: Counter<'object'>;

  constructor(metrics: MetricsService) {
    this.unknownObjects = new Counter({
      name: 'card_network_unknown_objects_total',
      help: 'Operations held off because the card network does not know their intent or refund (404): a wrong account or API key, for an operator',
      labelNames: ['object'],
      registers: [metrics.registry],
    });
  }

  /** A lookup or a confirm: any error leaves the outcome unknown (503, key and recovery point kept). */
  async ask<T>(op: PhasedOperation, object: { kind: 'intent' | 'refund'; ids: Record<string, string> }, name: string, call: () => Promise<T>): Promise<T> {
    try {
      return await op.call(call, name);
    } catch (error) {
      if (error instanceof UnknownNetworkObjectError) return this.holdOff(op, object, error);
      throw unknownOutcome(error);
    }
  }

  /**
   * The network does not know the object this operation recorded from its own
   * answer: no resume can learn anything until an operator fixes what points
   * us at the wrong account. Kept open (nothing is concluded about the money),
   * logged with its ids, counted, and left alone for UNKNOWN_OBJECT_HOLD_MS.
   */
  private async holdOff(op: PhasedOperation, object: { kind: 'intent' | 'refund'; ids: Record<string, string> }, error: Error): Promise<never> {
    this.reportUnknown(object.kind, { ...object.ids, client_id: op.scope }, `held for ${UNKNOWN_OBJECT_HOLD_MS / 60_000} min: ${error.message}`);
    await op.holdOff(UNKNOWN_OBJECT_HOLD_MS);
    throw new UnknownNetworkObjectException(object.kind);
  }

  /** An object we recorded from the network's own answer that it no longer knows: for an operator, with its ids. */
  reportUnknown(kind: 'intent' | 'refund', ids: Record<string, string>, what: string): void {
    const named = Object.entries(ids)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
    this.logger.error(`the card network does not know the ${kind} (${named}); ${what}`);
    this.unknownObjects.inc({ object: kind });
  }
}
