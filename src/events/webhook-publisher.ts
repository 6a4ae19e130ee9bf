import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import type { OutboxMessage } from 'safe-retries/outbox';
import { Webhook } from 'standardwebhooks';
import type { AppConfig } from '../config/config';
import { APP_CONFIG } from '../config/config.module';
import { HostResolver } from '../addresses/host-resolver';
import { BackgroundConnections } from '../database/background-connections';
import { PROBE_LEASE_S } from '../webhook-endpoints/endpoint-pacing';
import { ROTATION_OVERLAP } from '../webhook-endpoints/endpoint-secrets';
import { DeliveryTarget, WebhookEndpointsService } from '../webhook-endpoints/webhook-endpoints.service';
import { EventsService, toEventResponse } from './events.service';
import { EventsRepository } from './events.repository';
import type { EventResponse } from './dto/event.response';
import { AttemptOutcome, Begun, Delivery, FinishedAttempt, WebhookDeliveriesRepository } from './webhook-deliveries.repository';
import { DeliveryHeldError, DeliveryRetryError, errorClass } from './webhook-errors';
import { WebhookDeliveryPayload, WebhookDeliveryPort } from './webhook-delivery.port';
import { postWebhook } from './webhook-request';
import { RETRY_OFFSETS_S, retryAfter } from './webhook-schedule';

/** What a 410 Gone's endpoint is disabled with. */
export const GONE_REASON = 'the endpoint answered 410 Gone';

/** A delivery that may go now: where, and its attempt (started). */
interface Ready {
  target: DeliveryTarget;
  attemptId: string;
}

/**
 * Delivers one event to one endpoint (an outbox message of WEBHOOK_DELIVERY_TOPIC),
 * signed per Standard Webhooks: `webhook-id` is the event's id (the same on
 * every attempt and redelivery: the receiver deduplicates by it),
 * `webhook-timestamp` the attempt's time, `webhook-signature` the HMAC of both
 * and the body under the endpoint's secret (and under the one a rotation
 * replaced, while the overlap lasts: ROTATION_OVERLAP).
 *
 * The pace is the app's, not the outbox's: a message is sent only when its
 * next attempt is due on the retry schedule (webhook-schedule.ts) and its
 * endpoint admits it (not disabled; paused, only as its one probe:
 * endpoint-pacing.ts). Otherwise it is held (DeliveryHeldError): nothing is
 * sent or recorded. Held or failed, the message's next turn goes back to the
 * outbox as `retryAfterMs` (its step of the schedule, its endpoint's pause
 * end), so the relay hands it over then, not before; with no turn known (the
 * schedule over, the endpoint disabled) the relay's backoff decides. Every
 * attempt is recorded (webhook_deliveries): started before the request is
 * sent, finished with its outcome and, failed, the time of the next. A 2xx is
 * delivered as soon as it arrives: its record is finished after (the relay's
 * slot is free meanwhile; shutdown waits for it: `recorded`), and a record
 * that cannot be finished leaves it delivered (the receiver has it: sending
 * again would only repeat it). A refusal, an error or an answer other
 * than 2xx throws, after counting against the endpoint (a 410 disables it at
 * once, with a `webhook_endpoint.disabled` event in the same transaction). A
 * deleted endpoint gets nothing: the message resolves unsent. The secret
 * appears in no error and no log line. Its statements run in turns of
 * BackgroundConnections: a batch of deliveries never holds the pool that
 * requests need. The attempts' starts, and their ends, are each written in
 * batches (BackgroundConnections.batched): the deliveries the relay hands
 * over together start in one statement, and those that end while one is
 * written end together in the next.
 */
@Injectable()
export class WebhookPublisher implements OnModuleInit {
  private readonly logger = new Logger('WebhookPublisher');
  private readonly production: boolean;
  private readonly begin: (delivery: Delivery) => Promise<Begun>;
  private readonly finish: (attempt: FinishedAttempt) => Promise<number | undefined>;
  /** Successful attempts whose record is being written. */
  private readonly recording = new Set<Promise<void>>();

  constructor(
    private readonly port: WebhookDeliveryPort,
    private readonly endpoints: WebhookEndpointsService,
    private readonly events: EventsRepository,
    private readonly eventsService: EventsService,
    private readonly deliveries: WebhookDeliveriesRepository,
    private readonly connections: BackgroundConnections,
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly resolver: HostResolver,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.production = config.production;
    this.begin = connections.batched((ds) => deliveries.begin(ds, PROBE_LEASE_S, ROTATION_OVERLAP));
    this.finish = connections.batched((attempts) => deliveries.finish(attempts, RETRY_OFFSETS_S));
  }

  onModuleInit(): void {
    this.port.bind({ deliver: (message, signal) => this.deliver(message, signal), close: () => this.recorded() });
  }

  /** Once every successful attempt's record is written (the relay calls it at shutdown, after its last delivery). */
  private async recorded(): Promise<void> {
    await Promise.all(this.recording);
  }

  async deliver(message: OutboxMessage, signal: AbortSignal): Promise<void> {
    const payload = message.payload as WebhookDeliveryPayload;
    const { clientId, eventId, endpointId } = payload;
    const event = payload.event ?? (await this.storedEvent(clientId, eventId));
    if (!event) return;
    const begun = await this.begin({ clientId, eventId, endpointId, messageId: message.id });
    const ready = this.ready(message.id, endpointId, begun);
    if (!ready) return;
    const { target, attemptId } = ready;
    const body = JSON.stringify(toEventResponse(event));
    const timestamp = new Date();
    const headers = {
      'webhook-id': event.id,
      'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
      // Standard Webhooks: several signatures, space-separated; the receiver accepts the delivery when any verifies.
      'webhook-signature': target.secrets.map((secret) => new Webhook(secret).sign(event.id, timestamp, body)).join(' '),
    };
    let answer: Awaited<ReturnType<typeof postWebhook>>;
    try {
      answer = await postWebhook(new URL(target.url), headers, body, this.production, signal, this.resolver);
    } catch (error) {
      const reason = (error instanceof Error ? error.message : String(error)).slice(0, 1_000);
      const waitMs = await this.failed(payload, attemptId, { status: null, excerpt: null, errorClass: errorClass(error), error: reason });
      throw new DeliveryRetryError(`webhook to endpoint ${endpointId} failed: ${reason}`, waitMs, { cause: error });
    }
    const ok = answer.status >= 200 && answer.status < 300;
    const outcome = { status: answer.status, excerpt: answer.excerpt, errorClass: ok ? null : 'http_status', error: ok ? null : `answered ${answer.status}` };
    if (!ok) {
      const waitMs = await this.failed(payload, attemptId, outcome, answer);
      throw new DeliveryRetryError(`webhook to endpoint ${endpointId} answered ${answer.status}`, waitMs);
    }
    // The relay's slot frees now: the record is written after, in the next batch of ends.
    const recording = this.finish({ clientId, endpointId, id: attemptId, outcome }).then(
      () => undefined,
      (error: unknown) =>
        this.logger.warn(`delivered event ${eventId} to endpoint ${endpointId}, but its attempt ${attemptId} was not finished: ${(error as Error).message}`),
    );
    this.recording.add(recording);
    void recording.then(() => this.recording.delete(recording));
  }

  /** The event of a message queued without it, as stored; undefined when it is gone (nothing to send). */
  private async storedEvent(clientId: string, eventId: string): Promise<EventResponse | undefined> {
    const row = await this.connections.run(() => this.events.find(clientId, eventId));
    return row && toEventResponse(row);
  }

  /**
   * The delivery, when its attempt started (begin: due and admitted);
   * undefined when its endpoint is gone (nothing to send). Throws
   * DeliveryHeldError when it must wait. The message's turn comes first: only
   * a due message takes a paused endpoint's probe.
   */
  private ready(messageId: string, endpointId: string, begun: Begun): Ready | undefined {
    if (begun.over) {
      if (begun.url === null) return undefined;
      throw new DeliveryHeldError(`message ${messageId}: all ${begun.made} attempts were made; it waits for the outbox's horizon`, undefined);
    }
    if (!begun.due) throw new DeliveryHeldError(`message ${messageId}: its next attempt is not due`, begun.wait_ms ?? undefined);
    if (begun.url === null) return undefined;
    const admission = this.endpoints.admission(endpointId, begun);
    if (admission.held) throw new DeliveryHeldError(`endpoint ${endpointId} is ${admission.held}: message ${messageId} waits`, admission.probeInMs);
    // Due and admitted: begin started its attempt.
    return { target: admission.target, attemptId: begun.attempt_id! };
  }

  /**
   * A failed attempt: finished with its message's next time, then counted
   * against the endpoint; an endpoint this disables gets its event in the
   * same transaction. Answers the ms until that next time (none left: undefined).
   */
  private async failed(
    { clientId, endpointId }: WebhookDeliveryPayload,
    attemptId: string,
    outcome: AttemptOutcome,
    answer?: { status: number; retryAfter?: string },
  ): Promise<number | undefined> {
    const after = answer && retryAfter(answer.status, answer.retryAfter);
    const afterSeconds = after && 'seconds' in after ? after.seconds : null;
    const afterAt = after && 'at' in after ? after.at : null;
    const waitMs = await this.finish({ clientId, endpointId, id: attemptId, outcome, retry: { afterSeconds, afterAt } });
    const goneReason = answer?.status === 410 ? GONE_REASON : null;
    const disabled = await this.connections.run(() =>
      this.txHost.withTransaction(async () => {
        const endpoint = await this.endpoints.failed(clientId, endpointId, { goneReason, retryAfterSeconds: afterSeconds, retryAfterAt: afterAt });
        if (endpoint) await this.eventsService.record(clientId, 'webhook_endpoint.disabled', endpoint);
        return endpoint;
      }),
    );
    if (disabled) this.logger.warn(`webhook endpoint ${endpointId} is disabled: ${disabled.disabled_reason}`);
    return waitMs;
  }
}
