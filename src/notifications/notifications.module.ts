import { Inject, Injectable, Module, OnModuleInit } from '@nestjs/common';
import type { AppConfig } from '../config/config';
import { APP_CONFIG } from '../config/config.module';
import { unsafeProductionConfig } from '../config/production';
import { OrdersModule } from '../orders/orders.module';
import { ConfirmationLimits } from './confirmation-limits';
import { LoggingNotifier, Notifier } from './notifier';
import { NotifierModule } from './notifier.module';
import { NotificationsController } from './notifications.controller';
import { NotificationsService } from './notifications.service';

/**
 * With the production rules, the notifier that only logs is refused at boot:
 * the route would answer 202 "sent" while no message leaves. The check looks
 * at the Notifier actually bound, so binding a provider's adapter (a module
 * that overrides Notifier) is what lets production start with REDIS_URL.
 */
@Injectable()
class RealNotifierInProduction implements OnModuleInit {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly notifier: Notifier,
  ) {}

  onModuleInit(): void {
    if (this.config.production && this.notifier instanceof LoggingNotifier) {
      throw unsafeProductionConfig(
        this.config,
        'REDIS_URL mounts POST /orders/{id}/confirmation, whose notifier (LoggingNotifier) only logs: it would answer 202 and send nothing; bind Notifier to a real provider, or unset REDIS_URL',
      );
    }
  }
}

/**
 * Order confirmations, queued in the outbox with the request's key and sent
 * by its relay through the Notifier port (LoggingNotifier by default), within
 * ConfirmationLimits' caps. The caps are counted in Redis, so the app mounts
 * this module only when REDIS_URL is set.
 */
@Module({
  imports: [OrdersModule, NotifierModule],
  controllers: [NotificationsController],
  providers: [
    NotificationsService,
    { provide: ConfirmationLimits, inject: [APP_CONFIG], useFactory: (config: AppConfig) => ConfirmationLimits.connect(config) },
    RealNotifierInProduction,
  ],
  exports: [NotificationsService],
})
export class NotificationsModule {}
