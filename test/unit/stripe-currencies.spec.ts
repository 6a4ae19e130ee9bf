import { STRIPE_CURRENCIES as NETWORK_CURRENCIES, STRIPE_MINIMUM_CHARGE as NETWORK_MINIMUM_CHARGE } from '@safe-retries/card-network-simulator';
import { STRIPE_CURRENCIES, STRIPE_MINIMUM_CHARGE } from '../../src/payments/card-network/stripe-rules';

/**
 * Stripe's money rules have two homes: the service's (its payment DTO refuses
 * before any call) and the card network simulator's (it refuses as Stripe
 * does). Neither package may load the other, so this is what keeps them one
 * table: a currency or minimum changed in one and not the other fails here.
 */
describe("Stripe's currencies and minimum charges: the service's table is the simulator's", () => {
  it('lists the same currencies', () => {
    expect([...STRIPE_CURRENCIES].sort()).toEqual([...NETWORK_CURRENCIES].sort());
    expect(STRIPE_CURRENCIES.size).toBeGreaterThan(100);
  });

  it('has the same minimum charge in every currency', () => {
    expect(STRIPE_MINIMUM_CHARGE).toEqual(NETWORK_MINIMUM_CHARGE);
    expect(Object.keys(STRIPE_MINIMUM_CHARGE)).toContain('usd');
  });
});
