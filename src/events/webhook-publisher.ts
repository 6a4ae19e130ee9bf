import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import type { OutboxMessage } from 'safe-retries';
import { Webhook } from 'standardwebhooks';
import type { AppConfig } from '../config/config';
import { APP_CONFIG } from '../config/config.module';
import { BackgroundConnections } from '../database/background-connections';
import { WebhookEndpointsService } from '../webhook-endpoints/webhook-endpoints.service';
import { toEventResponse } from './events.service';
import { EventsRepository } from './events.repository';
import { DeliveryAttempt, WebhookDeliveriesRepository } from './webhook-deliveries.repository';
import { WebhookDeliveryPayload, WebhookDeliveryPort } from './webhook-delivery.port';
import { postWebhook } from './webhook-request';

/**
 * Delivers one event to one endpoint (an outbox message of WEBHOOK_DELIVERY_TOPIC),
 * signed per Standard Webhooks: `webhook-id` is the event's id (the same on
 * every attempt and redelivery: the receiver deduplicates by it),
 * `webhook-timestamp` the attempt's time, `webhook-signature` the HMAC of both
 * and the body under the endpoint's secret. Every attempt is recorded
 * (webhook_deliveries); a refusal, an error or an answer other than 2xx throws,
 * and the outbox retries on its schedule, then keeps it as a dead letter. A
 * deleted endpoint gets nothing: the message resolves unsent. The secret
 * appears in no error and no log line. Its statements run in turns of
 * BackgroundConnections: a batch of deliveries never holds the pool that
 * requests need.
 */
@Injectable()
export class WebhookPublisher implements OnModuleInit {
  private readonly production: boolean;

  constructor(
    private readonly port: WebhookDeliveryPort,
    private readonly endpoints: WebhookEndpointsService,
    private readonly events: EventsRepository,
    private readonly deliveries: WebhookDeliveriesRepository,
    private readonly connections: BackgroundConnections,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.production = config.production;
  }

  onModuleInit(): void {
    this.port.bind((message, signal) => this.deliver(message, signal));
  }

  async deliver(message: OutboxMessage, signal: AbortSignal): Promise<void> {
    const { clientId, eventId, endpointId } = message.payload as WebhookDeliveryPayload;
    const found = await this.connections.run(async () => {
      const target = await this.endpoints.target(clientId, endpointId);
      return target && { target, event: await this.events.find(clientId, eventId) };
    });
    if (!found?.event) return;
    const { target, event } = found;
    const body = JSON.stringify(toEventResponse(event));
    const timestamp = new Date();
    const headers = {
      'webhook-id': event.id,
      'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
      'webhook-signature': new Webhook(target.secret).sign(event.id, timestamp, body),
    };
    const attempt = { clientId, eventId, endpointId, messageId: message.id, attempt: message.attempt };
    let answer: { status: number; excerpt: string };
    try {
      answer = await postWebhook(new URL(target.url), headers, body, this.production, signal);
    } catch (error) {
      const reason = (error instanceof Error ? error.message : String(error)).slice(0, 1_000);
      await this.record({ ...attempt, status: null, excerpt: null, error: reason });
      throw new Error(`webhook to endpoint ${endpointId} failed: ${reason}`, { cause: error });
    }
    const ok = answer.status >= 200 && answer.status < 300;
    await this.record({ ...attempt, status: answer.status, excerpt: answer.excerpt, error: ok ? null : `answered ${answer.status}` });
    if (!ok) throw new Error(`webhook to endpoint ${endpointId} answered ${answer.status}`);
  }

  /** The attempt, written in a turn of the background's share of the pool (a batch's records queue among themselves). */
  private record(attempt: DeliveryAttempt): Promise<void> {
    return this.connections.run(() => this.deliveries.record(attempt));
  }
}
