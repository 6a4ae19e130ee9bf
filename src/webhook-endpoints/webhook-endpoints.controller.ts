import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ApiBody, ApiCreatedResponse, ApiExtraModels, ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiTags, getSchemaPath } from '@nestjs/swagger';
import { AuthenticatedClient } from '../auth/authenticated-client';
import { CurrentClient } from '../auth/current-client.decorator';
import { Idempotent } from 'safe-retries';
import { ApiProblems } from '../http/openapi';
import { ParseIdPipe } from '../http/parse-id.pipe';
import { CreateWebhookEndpointDto } from './dto/create-webhook-endpoint.dto';
import { RotateWebhookEndpointDto } from './dto/rotate-webhook-endpoint.dto';
import { ShownSecret, WebhookEndpointList, WebhookEndpointResponse, WebhookEndpointWithSecretResponse } from './dto/webhook-endpoint.response';
import { SecretAnswers } from './secret-answers';
import { WebhookEndpointsService } from './webhook-endpoints.service';

/** How deliveries are retried and endpoints paused or disabled (src/events/webhook-schedule.ts, endpoint-pacing.ts), in the routes' OpenAPI descriptions. */
const DELIVERY_POLICY =
  'Deliveries are retried on a fixed schedule: at once, then 5 s, 5 min, 30 min, 2 h, 5 h and 10 h after the attempt before, then every 10 h: ' +
  '12 attempts within 67 h 35 min of the first, a dead letter at 3 days (`POST /events/{id}/redeliver`). A 429 or 503 with `Retry-After` (seconds or an HTTP date) ' +
  'moves the next attempt to the first step at or after it (past the last step: the last), and pauses the endpoint until then (at most 1 h). After 5 failed attempts in a row ' +
  'the endpoint is paused as a whole: one probe delivery (after 1 min, doubling, at most 1 h) and, once it succeeds, the rest. A `410 Gone` disables it at once, ' +
  '5 days of failures with no success at its next failed attempt, with a `webhook_endpoint.disabled` event and `disabled_reason`; `POST /webhook-endpoints/{id}/enable` enables it again.';

/** What a retry of registration or rotation answers, in the routes' OpenAPI descriptions. */
const RETRIED =
  'A retry with the same `Idempotency-Key` answers the same secret again (it is kept only sealed in the endpoint, never with the stored answer); ' +
  'once a later rotation has replaced that secret, the retry gets `410 webhook_secret_replaced` instead.';

@ApiTags('webhook-endpoints')
@ApiProblems(401)
@Controller('webhook-endpoints')
export class WebhookEndpointsController {
  constructor(private readonly endpoints: WebhookEndpointsService) {}

  // The secret is shown only in the answer: SecretAnswers keeps it out of what the key stores.
  @Post()
  @Idempotent({ replay: SecretAnswers })
  @ApiOperation({ summary: 'Register a webhook endpoint; its signing secret is shown only in this answer', description: `${RETRIED} ${DELIVERY_POLICY}` })
  @ApiCreatedResponse({ type: WebhookEndpointWithSecretResponse })
  @ApiProblems(400, 410, 422)
  create(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreateWebhookEndpointDto): Promise<ShownSecret> {
    return this.endpoints.create(client.id, dto);
  }

  @Get()
  @ApiOperation({ summary: 'List webhook endpoints (without their secrets), with their status: a disabled one says why' })
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

  @Post(':id/enable')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Enable a disabled endpoint (200 whatever it was): its held deliveries resume, new events are queued for it again',
    description: DELIVERY_POLICY,
  })
  @ApiOkResponse({ type: WebhookEndpointResponse })
  @ApiProblems(404)
  enable(@CurrentClient() client: AuthenticatedClient, @Param('id', ParseIdPipe) id: string): Promise<WebhookEndpointResponse> {
    return this.endpoints.enable(client.id, id);
  }

  @Post(':id/rotate')
  @HttpCode(200)
  @Idempotent({ replay: SecretAnswers })
  @ApiOperation({
    summary: 'Replace the signing secret; the new one is shown only in this answer. The replaced one keeps signing beside it for 24 h',
    description:
      'Deliveries are signed with the new secret and, for 24 h from the rotation, with the one it replaces too: `webhook-signature` holds both ' +
      '(`v1,<new> v1,<previous>`), so a receiver verifies with either while it switches. A rotation within those 24 h drops the older one: ' +
      'only the secret it replaces keeps signing. With `{ "expire_previous": true }` no new secret is made: the replaced one stops signing now, ' +
      'and the answer has no `secret`. Neither secret is ever listed or shown again, but to a retry of this request. ' +
      RETRIED,
  })
  @ApiBody({ type: RotateWebhookEndpointDto, required: false })
  @ApiExtraModels(WebhookEndpointWithSecretResponse, WebhookEndpointResponse)
  @ApiOkResponse({
    description: 'The endpoint with its new `secret`; with `expire_previous`, the endpoint alone',
    schema: { anyOf: [{ $ref: getSchemaPath(WebhookEndpointWithSecretResponse) }, { $ref: getSchemaPath(WebhookEndpointResponse) }] },
  })
  @ApiProblems(400, 404, 410)
  rotate(
    @CurrentClient() client: AuthenticatedClient,
    @Param('id', ParseIdPipe) id: string,
    @Body() dto: RotateWebhookEndpointDto,
  ): Promise<WebhookEndpointResponse | ShownSecret> {
    return this.endpoints.rotate(client.id, id, dto.expire_previous === true);
  }
}
