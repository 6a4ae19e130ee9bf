import { Module } from '@nestjs/common';
import { OrdersModule } from '../orders/orders.module';
import { LoggingNotifier, Notifier } from './notifier';
import { NotificationsController } from './notifications.controller';
import { NotificationsService } from './notifications.service';

/**
 * Order confirmations, sent through the Notifier port (LoggingNotifier by
 * default). Its route keeps its keys in the idempotency module's Redis store,
 * so the app mounts this module only when REDIS_URL is set.
 */
@Module({
  imports: [OrdersModule],
  controllers: [NotificationsController],
  providers: [NotificationsService, LoggingNotifier, { provide: Notifier, useExisting: LoggingNotifier }],
  exports: [NotificationsService],
})
export class NotificationsModule {}
