import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import type { OutboxMessage } from 'safe-retries';
import { Webhook } from 'standardwebhooks';
import type { AppConfig } from '../config/config';
import { APP_CONFIG } from '../config/config.module';
import { BackgroundConnections } from '../database/background-connections';
import { WebhookEndpointsService } from '../webhook-endpoints/webhook-endpoints.service';
import { toEventResponse } from './events.service';
import { EventsRepository } from './events.repository';
import { AttemptOutcome, WebhookDeliveriesRepository } from './webhook-deliveries.repository';
import { errorClass } from './webhook-errors';
import { WebhookDeliveryPayload, WebhookDeliveryPort } from './webhook-delivery.port';
import { postWebhook } from './webhook-request';

/**
 * Delivers one event to one endpoint (an outbox message of WEBHOOK_DELIVERY_TOPIC),
 * signed per Standard Webhooks: `webhook-id` is the event's id (the same on
 * every attempt and redelivery: the receiver deduplicates by it),
 * `webhook-timestamp` the attempt's time, `webhook-signature` the HMAC of both
 * and the body under the endpoint's secret. Every attempt is recorded
 * (webhook_deliveries): started before the request is sent, finished with its
 * outcome; a 2xx is delivered even when its record cannot be finished (the
 * receiver has it: sending again would only repeat it). A refusal, an error or
 * an answer other than 2xx throws,
 * and the outbox retries on its schedule, then keeps it as a dead letter. A
 * deleted endpoint gets nothing: the message resolves unsent. The secret
 * appears in no error and no log line. Its statements run in turns of
 * BackgroundConnections: a batch of deliveries never holds the pool that
 * requests need.
 */
@Injectable()
export class WebhookPublisher implements OnModuleInit {
  private readonly logger = new Logger('WebhookPublisher');
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
    const attemptId = await this.connections.run(() =>
      this.deliveries.start({ clientId, eventId, endpointId, messageId: message.id, attempt: message.attempt }),
    );
    let answer: { status: number; excerpt: string };
    try {
      answer = await postWebhook(new URL(target.url), headers, body, this.production, signal);
    } catch (error) {
      const reason = (error instanceof Error ? error.message : String(error)).slice(0, 1_000);
      await this.finish(clientId, attemptId, { status: null, excerpt: null, errorClass: errorClass(error), error: reason });
      throw new Error(`webhook to endpoint ${endpointId} failed: ${reason}`, { cause: error });
    }
    const ok = answer.status >= 200 && answer.status < 300;
    const outcome = { status: answer.status, excerpt: answer.excerpt, errorClass: ok ? null : 'http_status', error: ok ? null : `answered ${answer.status}` };
    if (!ok) {
      await this.finish(clientId, attemptId, outcome);
      throw new Error(`webhook to endpoint ${endpointId} answered ${answer.status}`);
    }
    await this.finish(clientId, attemptId, outcome).catch((error: unknown) =>
      this.logger.warn(`delivered event ${eventId} to endpoint ${endpointId}, but its attempt ${attemptId} was not finished: ${(error as Error).message}`),
    );
  }

  /** The attempt's outcome, written in a turn of the background's share of the pool (a batch's records queue among themselves). */
  private finish(clientId: string, attemptId: string, outcome: AttemptOutcome): Promise<void> {
    return this.connections.run(() => this.deliveries.finish(clientId, attemptId, outcome));
  }
}
