import { Injectable } from '@nestjs/common';
import { EventsService } from '../../events/events.service';
import { toRefundResponse } from './payment-response';
import { PaymentsRepository, RefundRow } from './payments.repository';

/** A refund the network has already answered for (pending or succeeded), and what it says now. */
export type RefundSettlement = { status: 'succeeded' } | { status: 'failed'; failureReason: string | null };

/**
 * Each state a refund reaches and keeps, written with the event that
 * announces it, in the caller's transaction: no service moves a refund
 * without its event, or records an event without the move.
 */
@Injectable()
export class RefundRecords {
  constructor(
    private readonly payments: PaymentsRepository,
    private readonly events: EventsService,
  ) {}

  /** `processing` -> pending or succeeded, as the network answered; undefined when it was no longer processing. */
  async answered(clientId: string, id: string, networkRefundId: string, status: 'pending' | 'succeeded'): Promise<RefundRow | undefined> {
    const settled = await this.payments.settleRefund(clientId, id, networkRefundId, status);
    if (settled) await this.events.record(clientId, settled.status === 'succeeded' ? 'refund.succeeded' : 'refund.pending', toRefundResponse(settled));
    return settled;
  }

  /** A refund the network answered for moves on (pending -> succeeded; pending or succeeded -> failed, the amount given back). */
  async settle(clientId: string, id: string, networkRefundId: string, to: RefundSettlement): Promise<RefundRow | undefined> {
    const moved = await this.payments.moveRefund(clientId, id, networkRefundId, to);
    if (moved) await this.events.record(clientId, moved.status === 'succeeded' ? 'refund.succeeded' : 'refund.failed', toRefundResponse(moved));
    return moved;
  }

  /** `processing` -> requires_attention; false when it was no longer processing. */
  async handOver(clientId: string, id: string): Promise<boolean> {
    if (!(await this.payments.moveRefundAttention(clientId, id, 'processing', 'requires_attention'))) return false;
    await this.events.record(clientId, 'refund.requires_attention', toRefundResponse((await this.payments.findRefund(clientId, id))!));
    return true;
  }

  /** `requires_attention` -> failed by an operator (`reason`), the amount given back; undefined when it was no longer with a person. */
  async failByOperator(clientId: string, id: string, reason: string): Promise<RefundRow | undefined> {
    const failed = await this.payments.failRefundByOperator(clientId, id, reason);
    if (failed) await this.events.record(clientId, 'refund.failed', toRefundResponse(failed));
    return failed;
  }

  /** The network contradicts the refund's final state: the record stays, the client is told. */
  contradicted(clientId: string, refund: RefundRow): Promise<void> {
    return this.events.record(clientId, 'refund.contradicted', toRefundResponse(refund));
  }
}
