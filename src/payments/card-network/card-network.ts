/**
 * The port to the card network. The service depends on this abstract class;
 * the default adapter simulates a network in-process (SimulatedCardNetwork). A
 * real adapter forwards `idempotencyKey` as the provider's own idempotency key,
 * so even a worker that lost its lease and rolled back cannot charge twice at
 * the provider: the retry's charge is the same charge.
 */
export interface ChargeRequest {
  clientId: string;
  amount: number;
  currency: string;
  source: string;
  idempotencyKey?: string;
}

export type DeclineCode = 'card_declined' | 'insufficient_funds';

export type ChargeResult = { status: 'succeeded'; chargeId: string } | { status: 'declined'; declineCode: DeclineCode };

export abstract class CardNetwork {
  abstract charge(request: ChargeRequest): Promise<ChargeResult>;
}

/** The network does not know this card source (a bad request: nothing was charged). */
export class InvalidSourceError extends Error {
  override name = 'InvalidSourceError';
}

/** The network failed to process the charge (nothing was charged; retry). */
export class CardNetworkError extends Error {
  override name = 'CardNetworkError';
}
