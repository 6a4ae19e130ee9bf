import { Controller, Headers, HttpCode, Post, Req } from '@nestjs/common';
import { ApiBadRequestResponse, ApiConflictResponse, ApiHeader, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Public } from '../../auth/public.decorator';
import { CardNetworkWebhooks, WebhookReceipt } from './card-network-webhooks.service';

/** Where the card network delivers its events (CARD_NETWORK_WEBHOOK_URL of a standalone simulator, Stripe's dashboard). */
export const WEBHOOK_PATH = '/webhooks/card-network';

/** A request whose exact body bytes are kept (app.setup keeps them for WEBHOOK_PATH only). */
export interface RawBodyRequest {
  rawBody?: Buffer;
}

@ApiTags('webhooks')
@Controller('webhooks')
export class CardNetworkWebhooksController {
  constructor(private readonly webhooks: CardNetworkWebhooks) {}

  @Post('card-network')
  @Public()
  @HttpCode(200)
  @ApiOperation({
    summary: "The card network's events (Stripe's webhook format)",
    description:
      'No API key and no Idempotency-Key: the request is authenticated by its Stripe-Signature (HMAC-SHA256 of `t.payload` with STRIPE_WEBHOOK_SECRET, at most 5 minutes old). ' +
      'Each event id is processed once, in the same transaction as its effect: a payment or refund still processing is settled and its response stored under its Idempotency-Key; a repeat is answered 200 and changes nothing.',
  })
  @ApiHeader({ name: 'Stripe-Signature', required: true, description: '`t=<unix seconds>,v1=<hex HMAC-SHA256>`' })
  @ApiOkResponse({ description: 'Received: settled, a duplicate, or nothing to do.' })
  @ApiBadRequestResponse({ description: 'Missing, forged or stale signature (problem+json); nothing changed.' })
  @ApiConflictResponse({ description: "The operation is still held by its client's request; the network delivers the event again later." })
  receive(@Req() req: RawBodyRequest, @Headers('stripe-signature') signature?: string): Promise<WebhookReceipt> {
    return this.webhooks.receive(req.rawBody, signature);
  }
}
