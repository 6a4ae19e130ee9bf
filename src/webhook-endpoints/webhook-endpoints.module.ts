import { Module } from '@nestjs/common';
import { HostResolverModule } from '../addresses/host-resolver';
import { EndpointSecrets } from './endpoint-secrets';
import { SecretAnswers } from './secret-answers';
import { SecretsAtRest } from './secrets-at-rest';
import { WebhookEndpointsController } from './webhook-endpoints.controller';
import { WebhookEndpointsRepository } from './webhook-endpoints.repository';
import { WebhookEndpointsService } from './webhook-endpoints.service';

/** The clients' webhook endpoints: registration, listing, deletion, secret rotation, their secrets at rest and in replayed answers. */
@Module({
  imports: [HostResolverModule],
  controllers: [WebhookEndpointsController],
  providers: [WebhookEndpointsService, WebhookEndpointsRepository, EndpointSecrets, SecretsAtRest, SecretAnswers],
  exports: [WebhookEndpointsService, SecretsAtRest],
})
export class WebhookEndpointsModule {}
