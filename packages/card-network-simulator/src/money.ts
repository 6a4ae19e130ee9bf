/**
 * Stripe's refusals of a PaymentIntent's money, before anything is created: a
 * currency it does not support, an amount below the currency's minimum charge.
 * The facts are the network's table (currencies.ts); the answers are shaped as
 * Stripe's.
 */
import { invalid } from './api';
import { STRIPE_CURRENCIES, STRIPE_MINIMUM_CHARGE } from './currencies';

/** Stripe's zero-decimal currencies: an amount is in whole units (¥50 is 50). */
const ZERO_DECIMAL = new Set(['bif', 'clp', 'djf', 'gnf', 'jpy', 'kmf', 'krw', 'mga', 'pyg', 'rwf', 'ugx', 'vnd', 'vuv', 'xaf', 'xof', 'xpf']);
const SYMBOLS: Readonly<Record<string, string>> = { usd: '$', eur: '€', gbp: '£', jpy: '¥', inr: '₹' };

/** As Stripe writes a minimum: `$0.50 usd`, `¥50 jpy`, `15.00 czk`. */
export function formatMinimum(minimum: number, currency: string): string {
  const units = ZERO_DECIMAL.has(currency) ? String(minimum) : (minimum / 100).toFixed(2);
  return `${SYMBOLS[currency] ?? ''}${units} ${currency}`;
}

/** As Stripe lists them in its refusal: usd first, then the rest alphabetically. */
const SUPPORTED = ['usd', ...[...STRIPE_CURRENCIES].filter((c) => c !== 'usd').sort()].join(', ');

/** The currency, lower-case; 400 `param: currency` for one Stripe does not take (Stripe sends no code with it). */
export function checkCurrency(currency: string): string {
  const lower = currency.toLowerCase();
  if (!STRIPE_CURRENCIES.has(lower)) throw invalid(`Invalid currency: ${lower}. Stripe currently supports these currencies: ${SUPPORTED}`, undefined, 'currency');
  return lower;
}

/** 400 `amount_too_small` for an amount below what Stripe charges at least in `currency` (lower-case). */
export function checkMinimum(amount: number, currency: string): void {
  const minimum = STRIPE_MINIMUM_CHARGE[currency] ?? 1;
  if (amount < minimum) throw invalid(`Amount must be at least ${formatMinimum(minimum, currency)}`, 'amount_too_small', 'amount');
}
