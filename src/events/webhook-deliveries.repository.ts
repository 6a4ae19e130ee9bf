import { Injectable } from '@nestjs/common';
import { SqlRepository } from '../database/sql-repository';

export interface DeliveryAttempt {
  clientId: string;
  eventId: string;
  endpointId: string;
  messageId: string;
  attempt: number;
  status: number | null;
  excerpt: string | null;
  error: string | null;
}

/** Each attempt to deliver an event to an endpoint (written outside any transaction, by the relay). */
@Injectable()
export class WebhookDeliveriesRepository extends SqlRepository {
  async record(a: DeliveryAttempt): Promise<void> {
    await this.rows(
      `INSERT INTO webhook_deliveries (client_id, event_id, endpoint_id, message_id, attempt, status, response_excerpt, error)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [a.clientId, a.eventId, a.endpointId, a.messageId, a.attempt, a.status, a.excerpt, a.error],
    );
  }
}
