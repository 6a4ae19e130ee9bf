import { Injectable } from '@nestjs/common';
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyRequest } from 'fastify';
import { InvalidSignatureError, RequestSignature } from '../../auth/request-signature';
import { ProblemException } from '../../http/problem';
import { CardNetwork, InvalidWebhookError, MalformedWebhookError, NetworkEvent } from '../card-network/card-network';

declare module 'fastify' {
  interface FastifyRequest {
    /** The card network's event, once its signature verified (CardNetworkSignature). */
    webhookEvent?: NetworkEvent;
  }
}

const MISSING = 'The Stripe-Signature header and the raw body are required.';

/**
 * The card network's webhooks are authenticated by their Stripe-Signature
 * alone (HMAC-SHA256 of `t.payload` with CARD_NETWORK_WEBHOOK_SECRET, at most 5
 * minutes old), verified by the card network adapter on the exact bytes
 * received, before anything parses them: the route keeps its body raw
 * (SignedRoute). A verified event is put on the request (`webhookEvent`).
 * Signed bytes that are not an event: 400 `invalid_webhook_event`. Auth
 * decides when this runs and answers a signature that does not verify
 * (Authentication, WebhookSignatureLimiter).
 */
@Injectable()
export class CardNetworkSignature extends RequestSignature {
  constructor(private readonly cardNetwork: CardNetwork) {
    super();
  }

  /** Whether a Stripe-Signature header has the expected form, a timestamp and a v1 HMAC-SHA256. */
  looksSigned(headers: IncomingHttpHeaders): boolean {
    const header = headers['stripe-signature'];
    if (typeof header !== 'string') return false;
    const parts = header.split(',').map((p) => p.trim());
    return parts.some((p) => /^t=\d{1,12}$/.test(p)) && parts.some((p) => /^v1=[0-9a-fA-F]{64}$/.test(p));
  }

  verify(request: FastifyRequest): void {
    const payload = request.rawBody;
    const signature = request.headers['stripe-signature'];
    if (payload === undefined || typeof signature !== 'string') throw new InvalidSignatureError(MISSING);
    try {
      request.webhookEvent = this.cardNetwork.parseWebhook(payload, signature);
    } catch (error) {
      if (error instanceof MalformedWebhookError) throw malformedEvent(error);
      if (error instanceof InvalidWebhookError) throw new InvalidSignatureError('The signature does not verify, or is too old.');
      throw error;
    }
  }
}

function malformedEvent(error: MalformedWebhookError): ProblemException {
  return new ProblemException({ status: 400, code: 'invalid_webhook_event', title: 'Invalid Webhook Event', detail: error.message });
}
