import { Injectable, Module } from '@nestjs/common';
import type { OutboxPublisher } from 'safe-retries/outbox';
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

/**
 * Where the outbox's publisher (configured with the idempotency module, before
 * the events' providers exist) finds the webhook publisher: EventsModule binds
 * it at init. A delivery before that, or in a process without EventsModule,
 * fails and is retried.
 */
@Injectable()
export class WebhookDeliveryPort {
  private publisher?: OutboxPublisher;

  bind(publisher: OutboxPublisher): void {
    this.publisher = publisher;
  }

  readonly publish: OutboxPublisher = (message, signal) => {
    if (!this.publisher) return Promise.reject(new Error('no webhook publisher is bound (EventsModule is not loaded)'));
    return this.publisher(message, signal);
  };
}

@Module({ providers: [WebhookDeliveryPort], exports: [WebhookDeliveryPort] })
export class WebhookDeliveryPortModule {}
