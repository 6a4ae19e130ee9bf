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
  sentAt: Date;
}

/**
 * The port through which the app sends notifications (an email or SMS
 * provider in production). Sending is a side effect outside the database: the
 * route that sends is made exactly-once by the Redis store, not by a
 * transaction (see NotificationsController).
 */
export abstract class Notifier {
  abstract send(notification: Notification): Promise<SentNotification>;
}

/** The most sends LoggingNotifier keeps for inspection (oldest go first). */
const KEPT_SENDS = 1_000;

/**
 * The default notifier: logs each send and keeps the last ones in memory
 * (`sent()`), for development and tests. A provider's adapter replaces it.
 */
@Injectable()
export class LoggingNotifier extends Notifier {
  private readonly logger = new Logger('Notifier');
  private readonly sends: SentNotification[] = [];

  send(notification: Notification): Promise<SentNotification> {
    const sent: SentNotification = { ...notification, id: randomUUID(), sentAt: new Date() };
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
