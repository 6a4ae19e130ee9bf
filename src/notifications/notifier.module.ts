import { Module } from '@nestjs/common';
import { LoggingNotifier, Notifier } from './notifier';

/**
 * The Notifier port and its default binding, on their own: the confirmations'
 * route (NotificationsModule) and the outbox's publisher (configured with the
 * idempotency module) reach the same notifier through it.
 */
@Module({
  providers: [LoggingNotifier, { provide: Notifier, useExisting: LoggingNotifier }],
  exports: [LoggingNotifier, Notifier],
})
export class NotifierModule {}
