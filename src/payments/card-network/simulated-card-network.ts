import { createHash } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG } from '../../config/config.module';
import type { AppConfig } from '../../config/config';
import { CardNetwork, CardNetworkError, ChargeRequest, ChargeResult, InvalidSourceError } from './card-network';

/**
 * An in-process card network with Stripe's test tokens and CARD_NETWORK_DELAY of
 * latency. Like a real provider it is idempotent on the key it is given: the
 * same (client, key) always yields the same charge id.
 */
const SUCCEEDING = new Set(['tok_visa', 'tok_mastercard', 'tok_amex']);

@Injectable()
export class SimulatedCardNetwork extends CardNetwork {
  private readonly delayMs: number;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    super();
    this.delayMs = config.cardNetwork.delayMs;
  }

  async charge(request: ChargeRequest): Promise<ChargeResult> {
    if (this.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    switch (request.source) {
      case 'tok_chargeDeclined':
        return { status: 'declined', declineCode: 'card_declined' };
      case 'tok_chargeDeclinedInsufficientFunds':
        return { status: 'declined', declineCode: 'insufficient_funds' };
      case 'tok_processingError':
        throw new CardNetworkError('the card network could not process the charge');
      default:
        if (!SUCCEEDING.has(request.source)) throw new InvalidSourceError(`unknown card source`);
        return { status: 'succeeded', chargeId: this.chargeId(request) };
    }
  }

  private chargeId(request: ChargeRequest): string {
    const seed = request.idempotencyKey ? `${request.clientId}\n${request.idempotencyKey}` : `${Date.now()}\n${Math.random()}`;
    return `ch_${createHash('sha256').update(seed).digest('hex').slice(0, 24)}`;
  }
}
