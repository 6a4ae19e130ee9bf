import { Module } from '@nestjs/common';
import { HostResolverModule } from '../addresses/host-resolver';
import { WebhookEndpointsModule } from '../webhook-endpoints/webhook-endpoints.module';
import { EventsController } from './events.controller';
import { EventsRepository } from './events.repository';
import { EventsService } from './events.service';
import { EventsPurgeJob } from './retention/events-purge.job';
import { EventsPurgeRepository } from './retention/events-purge.repository';
import { WebhookDeliveriesRepository } from './webhook-deliveries.repository';
import { WebhookDeliveryPortModule } from './webhook-delivery.port';
import { WebhookPublisher } from './webhook-publisher';

/**
 * Events of payments, refunds and orders: recorded with their changes, listed,
 * delivered to the clients' endpoints, and purged past their retention (retention/).
 */
@Module({
  imports: [WebhookEndpointsModule, WebhookDeliveryPortModule, HostResolverModule],
  controllers: [EventsController],
  providers: [EventsService, EventsRepository, WebhookDeliveriesRepository, WebhookPublisher, EventsPurgeJob, EventsPurgeRepository],
  exports: [EventsService],
})
export class EventsModule {}
