import { Module } from '@nestjs/common';
import { EndpointSecrets } from './endpoint-secrets';
import { WebhookEndpointsController } from './webhook-endpoints.controller';
import { WebhookEndpointsRepository } from './webhook-endpoints.repository';
import { WebhookEndpointsService } from './webhook-endpoints.service';

/** The clients' webhook endpoints: registration, listing, deletion, secret rotation. */
@Module({
  controllers: [WebhookEndpointsController],
  providers: [WebhookEndpointsService, WebhookEndpointsRepository, EndpointSecrets],
  exports: [WebhookEndpointsService],
})
export class WebhookEndpointsModule {}
