import { Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';

/** One message to a customer: what a notifier sends. */
export interface Notification {
  /** The client (tenant) on whose behalf it is sent. */
  clientId: string;
  channel: 'email' | 'sms';
  recipient: string;
  subject: string;
  text: string;
}

export interface SentNotification extends Notification {
  id: string;
  /** The idempotency key it was sent under (the outbox message's id). */
  key: string;
  sentAt: Date;
}

/**
 * The port through which the app sends notifications (an email or SMS
 * provider in production). Sending is a side effect outside the database: the
 * outbox's relay calls it after the commit, at least once, with the outbox
 * message's id as `idempotencyKey`; an adapter passes it to its provider (an
 * `Idempotency-Key` header) so that a second delivery sends nothing twice.
 */
export abstract class Notifier {
  abstract send(notification: Notification, idempotencyKey: string): Promise<SentNotification>;
}

/** The most sends LoggingNotifier keeps for inspection (oldest go first). */
const KEPT_SENDS = 1_000;

/**
 * The default notifier: logs each send and keeps the last ones in memory
 * (`sent()`), for development and tests; a second send under a kept key
 * answers the first (as a provider honouring the key does). A provider's
 * adapter replaces it.
 */
@Injectable()
export class LoggingNotifier extends Notifier {
  private readonly logger = new Logger('Notifier');
  private readonly sends: SentNotification[] = [];

  send(notification: Notification, idempotencyKey: string): Promise<SentNotification> {
    const earlier = this.sends.find((s) => s.key === idempotencyKey);
    if (earlier) return Promise.resolve(earlier);
    const sent: SentNotification = { ...notification, id: randomUUID(), key: idempotencyKey, sentAt: new Date() };
    this.sends.push(sent);
    if (this.sends.length > KEPT_SENDS) this.sends.shift();
    this.logger.log(`${sent.channel} ${sent.id} sent for client ${sent.clientId}: ${sent.subject}`);
    return Promise.resolve(sent);
  }

  /** The sends kept, oldest first. */
  sent(): readonly SentNotification[] {
    return this.sends;
  }
}
