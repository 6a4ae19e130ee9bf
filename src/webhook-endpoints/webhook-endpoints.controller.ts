import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AuthenticatedClient } from '../auth/authenticated-client';
import { CurrentClient } from '../auth/current-client.decorator';
import { ApiProblems } from '../http/openapi';
import { ParseIdPipe } from '../http/parse-id.pipe';
import { CreateWebhookEndpointDto } from './dto/create-webhook-endpoint.dto';
import { WebhookEndpointList, WebhookEndpointWithSecretResponse } from './dto/webhook-endpoint.response';
import { WebhookEndpointsService } from './webhook-endpoints.service';

// Not @Idempotent(): a stored response would keep the secret; a retried create makes a second endpoint, which DELETE removes.
@ApiTags('webhook-endpoints')
@ApiProblems(401)
@Controller('webhook-endpoints')
export class WebhookEndpointsController {
  constructor(private readonly endpoints: WebhookEndpointsService) {}

  @Post()
  @ApiOperation({ summary: 'Register a webhook endpoint; its signing secret is shown only in this answer' })
  @ApiCreatedResponse({ type: WebhookEndpointWithSecretResponse })
  @ApiProblems(400, 422)
  create(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreateWebhookEndpointDto): Promise<WebhookEndpointWithSecretResponse> {
    return this.endpoints.create(client.id, dto);
  }

  @Get()
  @ApiOperation({ summary: 'List webhook endpoints (without their secrets)' })
  @ApiOkResponse({ type: WebhookEndpointList })
  list(@CurrentClient() client: AuthenticatedClient) {
    return this.endpoints.list(client.id);
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete a webhook endpoint (its pending deliveries are dropped)' })
  @ApiNoContentResponse()
  @ApiProblems(404)
  delete(@CurrentClient() client: AuthenticatedClient, @Param('id', ParseIdPipe) id: string): Promise<void> {
    return this.endpoints.delete(client.id, id);
  }

  @Post(':id/rotate')
  @HttpCode(200)
  @ApiOperation({ summary: 'Replace the signing secret; the new one is shown only in this answer' })
  @ApiOkResponse({ type: WebhookEndpointWithSecretResponse })
  @ApiProblems(404)
  rotate(@CurrentClient() client: AuthenticatedClient, @Param('id', ParseIdPipe) id: string): Promise<WebhookEndpointWithSecretResponse> {
    return this.endpoints.rotate(client.id, id);
  }
}
