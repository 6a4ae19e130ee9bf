import { Inject, Injectable } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import type { WebhookEvent } from '@safe-retries/client';
import { PaymentEvent } from './payment-event.entity';

/** How long applying an event takes after its row is written (0; the tests slow it down so deliveries overlap). */
export const APPLY_DELAY_MS = Symbol('APPLY_DELAY_MS');

@Injectable()
export class PaymentEventsService {
  constructor(
    // Writes through the transaction IdempotentConsumer opens: the row and the
    // record that the event was processed commit together, or neither does.
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @Inject(APPLY_DELAY_MS) private readonly delayMs: number,
  ) {}

  async apply(event: WebhookEvent): Promise<void> {
    const paymentId = typeof event.data.id === 'string' ? event.data.id : null;
    await this.txHost.tx.getRepository(PaymentEvent).insert({ eventId: event.id, type: event.type, paymentId });
    if (this.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
  }
}
