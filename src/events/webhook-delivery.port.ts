import { Injectable, Module } from '@nestjs/common';
import type { OutboxMessage, OutboxPublisher } from 'safe-retries/outbox';
import type { EventResponse } from './dto/event.response';

/** The outbox topic of one event's delivery to one endpoint; its payload is a WebhookDeliveryPayload. */
export const WEBHOOK_DELIVERY_TOPIC = 'webhook.delivery';

export interface WebhookDeliveryPayload {
  clientId: string;
  eventId: string;
  endpointId: string;
  /** The event as its webhook's body shows it; absent from a message queued without it, whose delivery reads the event. */
  event?: EventResponse;
}

/** What EventsModule binds: the delivery of one message, and what shutdown waits for once the last ended. */
export interface WebhookDeliverer {
  deliver(message: OutboxMessage, signal: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

/**
 * Where the outbox's publisher (configured with the idempotency module, before
 * the events' providers exist) finds the webhook publisher: EventsModule binds
 * it at init. A delivery before that, or in a process without EventsModule,
 * fails and is retried.
 */
@Injectable()
export class WebhookDeliveryPort {
  private deliverer?: WebhookDeliverer;

  bind(deliverer: WebhookDeliverer): void {
    this.deliverer = deliverer;
  }

  readonly publish: OutboxPublisher = (message, signal) => {
    if (!this.deliverer) return Promise.reject(new Error('no webhook publisher is bound (EventsModule is not loaded)'));
    return this.deliverer.deliver(message, signal);
  };

  /** Called by the relay at shutdown, after its last delivery (OutboxPublisher.close). */
  async close(): Promise<void> {
    await this.deliverer?.close();
  }
}

@Module({ providers: [WebhookDeliveryPort], exports: [WebhookDeliveryPort] })
export class WebhookDeliveryPortModule {}
