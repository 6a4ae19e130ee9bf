import { Module } from '@nestjs/common';
import { WebhookEndpointsModule } from '../webhook-endpoints/webhook-endpoints.module';
import { EventsController } from './events.controller';
import { EventsRepository } from './events.repository';
import { EventsService } from './events.service';
import { WebhookDeliveriesRepository } from './webhook-deliveries.repository';
import { WebhookDeliveryPortModule } from './webhook-delivery.port';
import { WebhookPublisher } from './webhook-publisher';

/** Events of payments, refunds and orders: recorded with their changes, listed, and delivered to the clients' endpoints. */
@Module({
  imports: [WebhookEndpointsModule, WebhookDeliveryPortModule],
  controllers: [EventsController],
  providers: [EventsService, EventsRepository, WebhookDeliveriesRepository, WebhookPublisher],
  exports: [EventsService],
})
export class EventsModule {}
