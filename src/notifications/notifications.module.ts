import { Module } from '@nestjs/common';
import type { AppConfig } from '../config/config';
import { APP_CONFIG } from '../config/config.module';
import { OrdersModule } from '../orders/orders.module';
import { ConfirmationLimits } from './confirmation-limits';
import { LoggingNotifier, Notifier } from './notifier';
import { NotificationsController } from './notifications.controller';
import { NotificationsService } from './notifications.service';

/**
 * Order confirmations, sent through the Notifier port (LoggingNotifier by
 * default) within ConfirmationLimits' caps. Its route keeps its keys in the
 * idempotency module's Redis store, so the app mounts this module only when
 * REDIS_URL is set.
 */
@Module({
  imports: [OrdersModule],
  controllers: [NotificationsController],
  providers: [
    NotificationsService,
    LoggingNotifier,
    { provide: Notifier, useExisting: LoggingNotifier },
    { provide: ConfirmationLimits, inject: [APP_CONFIG], useFactory: (config: AppConfig) => ConfirmationLimits.connect(config) },
  ],
  exports: [NotificationsService],
})
export class NotificationsModule {}
