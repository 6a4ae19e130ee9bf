import { Controller, HttpCode, Post, Req } from '@nestjs/common';
import { ApiBadRequestResponse, ApiConflictResponse, ApiHeader, ApiOkResponse, ApiOperation, ApiPayloadTooLargeResponse, ApiTags, ApiTooManyRequestsResponse } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { SignedRoute } from '../../http/route-access';
import { CardNetworkWebhooks, WebhookReceipt } from './card-network-webhooks.service';

/** Where the card network delivers its events (CARD_NETWORK_WEBHOOK_URL of a standalone simulator, Stripe's dashboard). */
export const WEBHOOK_PATH = '/webhooks/card-network';

/**
 * The largest delivery accepted: Stripe's events are a few kilobytes (an event
 * carries one object, and its metadata is capped at 50 keys of 500 characters).
 * Past it: 413, the rest of the body unread.
 */
export const WEBHOOK_BODY_LIMIT = 64 * 1024;

@ApiTags('webhooks')
@Controller('webhooks')
export class CardNetworkWebhooksController {
  constructor(private readonly webhooks: CardNetworkWebhooks) {}

  @Post('card-network')
  @SignedRoute(WEBHOOK_BODY_LIMIT)
  @HttpCode(200)
  @ApiOperation({
    summary: "The card network's events (Stripe's webhook format)",
    description:
      'No API key and no Idempotency-Key: the request is authenticated by its Stripe-Signature (HMAC-SHA256 of `t.payload` with CARD_NETWORK_WEBHOOK_SECRET, at most 5 minutes old), verified on the raw body before it is parsed; the body is at most 64 KiB. ' +
      'Each event id is processed once, in the same transaction as its effect: a payment or refund still processing is settled and its response stored under its Idempotency-Key; a repeat is answered 200 and changes nothing.',
  })
  @ApiHeader({ name: 'Stripe-Signature', required: true, description: '`t=<unix seconds>,v1=<hex HMAC-SHA256>`' })
  @ApiOkResponse({ description: 'Received: settled, a duplicate, or nothing to do.' })
  @ApiBadRequestResponse({ description: 'Missing, forged or stale signature, or a signed body that is not an event (problem+json); nothing changed.' })
  @ApiPayloadTooLargeResponse({ description: 'A body over 64 KiB (problem+json); the connection is closed.' })
  @ApiTooManyRequestsResponse({ description: 'Too many deliveries with an invalid signature from this address (problem+json, Retry-After); a delivery that verifies is never refused.' })
  @ApiConflictResponse({ description: "The operation is still held by its client's request; the network delivers the event again later." })
  receive(@Req() request: FastifyRequest): Promise<WebhookReceipt> {
    // Authentication let the request through: its signature verified, and CardNetworkSignature kept its event.
    return this.webhooks.receive(request.webhookEvent!);
  }
}
