import { Injectable } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { randomBytes } from 'node:crypto';
import { Outbox } from 'safe-retries/outbox';
import { invalidCursor } from '../http/pagination';
import { problems } from '../http/problem';
import { WebhookEndpointsService } from '../webhook-endpoints/webhook-endpoints.service';
import { DEFAULT_EVENTS_PAGE, DeliveryAttemptList, EVENT_ID, EventPage, EventQueryDto, EventResponse, MAX_ATTEMPTS_LISTED } from './dto/event.response';
import type { EventType } from '../event-types/event-types';
import { EventRow, EventsRepository } from './events.repository';
import { WebhookDeliveriesRepository } from './webhook-deliveries.repository';
import { WEBHOOK_DELIVERY_TOPIC, WebhookDeliveryPayload } from './webhook-delivery.port';

/** The event as the API shows it (and a webhook's body), its keys in this order: created_at as ISO text, or given as such. */
export function toEventResponse(row: Omit<EventRow, 'created_at'> & { created_at: Date | string }): EventResponse {
  const created_at = typeof row.created_at === 'string' ? row.created_at : row.created_at.toISOString();
  return { id: row.id, object: 'event', type: row.type, data: row.data, created_at };
}

/**
 * A client's events. `record` is called at each state change of a payment,
 * refund or order, inside the change's transaction: the event, and one
 * outbox message per endpoint subscribed to its type, commit with the change
 * or roll back with it. The outbox's relay then delivers each (WebhookPublisher).
 */
@Injectable()
export class EventsService {
  constructor(
    private readonly events: EventsRepository,
    private readonly deliveries: WebhookDeliveriesRepository,
    private readonly endpoints: WebhookEndpointsService,
    private readonly outbox: Outbox,
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
  ) {}

  /**
   * Records `type` about `data` (the resource's public representation); throws outside a transaction.
   *
   * Two statements, however many endpoints are subscribed (up to
   * MAX_ENDPOINTS_PER_CLIENT), so the change's transaction, its locks and its
   * request last no longer for a client with more endpoints: one writes the
   * event and answers its subscribers (EventsRepository.insert), one queues a
   * message for each (Outbox.add with a list, one INSERT … SELECT). Not one:
   * the outbox's table, its stream locks and its NOTIFY are the library's,
   * written only through Outbox.add, which is what keeps them committing with
   * the change and waking the relay.
   */
  async record(clientId: string, type: EventType, data: object): Promise<void> {
    if (!this.txHost.isTransactionActive()) throw new Error(`EventsService.record(${type}): no transaction, so the event would not commit with its change`);
    const id = `evt_${randomBytes(16).toString('hex')}`;
    const { created_at, endpoints } = await this.events.insert(clientId, id, type, data);
    await this.enqueue(clientId, toEventResponse({ id, type, data: data as EventRow['data'], created_at }), endpoints);
  }

  async list(clientId: string, query: EventQueryDto): Promise<EventPage> {
    const limit = query.limit ?? DEFAULT_EVENTS_PAGE;
    const rows = await this.events.listPage(clientId, limit, query.starting_after);
    if (query.starting_after && rows.length === 0 && !(await this.events.find(clientId, query.starting_after))) throw invalidCursor(query.starting_after);
    const items = rows.slice(0, limit);
    const has_more = rows.length > limit;
    return { object: 'list', data: items.map(toEventResponse), has_more, next_cursor: has_more ? items[items.length - 1].id : null };
  }

  async get(clientId: string, id: string): Promise<EventResponse> {
    return toEventResponse(await this.found(clientId, id));
  }

  /** The event's delivery attempts, newest first (never a secret: the attempt keeps the answer and the error only). */
  async attempts(clientId: string, id: string): Promise<DeliveryAttemptList> {
    await this.found(clientId, id);
    return { object: 'list', data: await this.deliveries.list(clientId, id, MAX_ATTEMPTS_LISTED) };
  }

  /**
   * Queues the event again, for one endpoint of the client's or for every
   * endpoint subscribed to its type (a dead letter's event, a receiver that
   * lost it). It goes under the same webhook-id: a receiver that has it ignores it.
   */
  async redeliver(clientId: string, id: string, endpointId?: string): Promise<string[]> {
    const event = await this.found(clientId, id);
    let targets: string[];
    if (endpointId) {
      if (!(await this.endpoints.exists(clientId, endpointId))) throw problems.notFound(`No webhook endpoint ${endpointId}.`);
      targets = [endpointId];
    } else {
      targets = await this.events.subscribers(clientId, event.type);
    }
    await this.txHost.withTransaction(() => this.enqueue(clientId, toEventResponse(event), targets));
    return targets;
  }

  private async found(clientId: string, id: string): Promise<EventRow> {
    const row = EVENT_ID.test(id) ? await this.events.find(clientId, id) : undefined;
    if (!row) throw problems.notFound(`No event ${id}.`);
    return row;
  }

  /**
   * A delivery of the event to each endpoint, in one statement (none for no
   * endpoint); each message carries the event, so its delivery reads nothing
   * of it again. Each endpoint is a lane of the outbox's, and the client its
   * group: a relay holds at most 4 deliveries to one endpoint and 20 to one
   * client at once (of its 40), and gives a free slot to the client with the
   * fewest in flight, then to its endpoint with the fewest. So a slow
   * endpoint delays its own deliveries, and a client's many endpoints take
   * no more of the relay than another client's one.
   */
  private async enqueue(clientId: string, event: EventResponse, endpointIds: string[]): Promise<void> {
    const payload = (endpointId: string): WebhookDeliveryPayload => ({ clientId, eventId: event.id, endpointId, event });
    await this.outbox.add(
      endpointIds.map((endpointId) => ({ topic: WEBHOOK_DELIVERY_TOPIC, payload: payload(endpointId), lane: `webhook-endpoint:${endpointId}`, group: `client:${clientId}` })),
    );
  }
}
