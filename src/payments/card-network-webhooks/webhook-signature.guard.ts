import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { ProblemException } from '../../http/problem';
import { CardNetwork, InvalidWebhookError, MalformedWebhookError } from '../card-network/card-network';
import { WebhookSignatureLimiter } from './webhook-signature.limiter';

/**
 * The card network's webhooks are authenticated by their Stripe-Signature
 * alone (HMAC-SHA256 of `t.payload` with CARD_NETWORK_WEBHOOK_SECRET, at most 5
 * minutes old), verified by the card network adapter on the exact bytes
 * received, before anything parses them: the route keeps its body raw
 * (SignedRoute). A verified event is put on the request (`webhookEvent`).
 * Signed bytes that are not an event: 400 `invalid_webhook_event` (the sender
 * holds the secret, so it counts against no budget of invalid signatures).
 * Otherwise 400 `invalid_webhook_signature`, or 429 from an address over its
 * budget of invalid signatures (WebhookSignatureLimiter); a verified event
 * passes whatever its address.
 */
@Injectable()
export class WebhookSignatureGuard implements CanActivate {
  constructor(
    private readonly cardNetwork: CardNetwork,
    private readonly limiter: WebhookSignatureLimiter,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<FastifyRequest>();
    const payload = request.rawBody;
    const signature = request.headers['stripe-signature'];
    try {
      if (payload === undefined || typeof signature !== 'string') throw new InvalidWebhookError('The Stripe-Signature header and the raw body are required.');
      request.webhookEvent = this.cardNetwork.parseWebhook(payload, signature);
      return true;
    } catch (error) {
      if (error instanceof MalformedWebhookError) throw malformedEvent(error);
      if (!(error instanceof InvalidWebhookError)) throw error;
      const blockedFor = this.limiter.blockedFor(request.ip);
      if (blockedFor !== undefined) throw this.limiter.refusal(blockedFor);
      throw invalidSignature(payload === undefined || typeof signature !== 'string');
    }
  }
}

function invalidSignature(missing: boolean): ProblemException {
  return new ProblemException({
    status: 400,
    code: 'invalid_webhook_signature',
    title: 'Invalid Webhook Signature',
    detail: missing ? 'The Stripe-Signature header and the raw body are required.' : 'The signature does not verify, or is too old.',
  });
}

function malformedEvent(error: MalformedWebhookError): ProblemException {
  return new ProblemException({ status: 400, code: 'invalid_webhook_event', title: 'Invalid Webhook Event', detail: error.message });
}
