import { BadRequestException, Controller, HttpCode, Inject, Post, Req } from '@nestjs/common';
import type { RawBodyRequest } from '@nestjs/common';
import { verifyWebhook, WebhookVerificationError } from '@safe-retries/client';
import type { Request } from 'express';
import { IdempotentConsumer } from 'safe-retries/messages';
import { PaymentEventsService } from './payment-events.service';

/** The endpoint's `whsec_…` secret, or several while it is rotated. */
export const WEBHOOK_SECRET = Symbol('WEBHOOK_SECRET');

/** The sender whose event ids IdempotentConsumer records (ids of two senders never collide). */
const SOURCE = 'payments-api';

@Controller('webhooks')
export class WebhooksController {
  constructor(
    private readonly consumer: IdempotentConsumer,
    private readonly events: PaymentEventsService,
    @Inject(WEBHOOK_SECRET) private readonly secret: string | string[],
  ) {}

  /**
   * A delivery is verified against the bytes received (`rawBody: true` in main.ts), then
   * applied once per `webhook-id`: a redelivery, even one arriving during the first, is
   * answered 200 without applying it again. A delivery that fails verification is 400.
   */
  @Post()
  @HttpCode(200)
  async receive(@Req() req: RawBodyRequest<Request>): Promise<{ processed: boolean }> {
    if (!req.rawBody) throw new BadRequestException('expected a JSON body (Content-Type: application/json)');
    const event = await verifyWebhook(req.rawBody, req.headers, this.secret).catch((error: unknown) => {
      throw error instanceof WebhookVerificationError ? new BadRequestException(error.message) : error;
    });
    // Verified: webhook-id is one signed header, the event's id on every delivery.
    const { processed } = await this.consumer.process(SOURCE, String(req.headers['webhook-id']), () => this.events.apply(event));
    return { processed };
  }
}
