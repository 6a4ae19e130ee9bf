/**
 * What Stripe refuses before it does anything, as facts of its API: the
 * currencies a PaymentIntent can be created in and the smallest amount it
 * charges in each. The payment DTO refuses the same before any call. The card
 * network simulator (a development tool the service never loads in production)
 * carries the network's own copy of these two tables and refuses them as Stripe
 * does (400 invalid_request_error, `param: currency` / `param: amount`), so a
 * refusal the DTO missed still ends the operation instead of keeping it open;
 * test/unit/stripe-currencies.spec.ts holds the two copies equal.
 */

/** Stripe's presentment currencies, lower-case (ISO 4217 codes it accepts for card payments). */
export const STRIPE_CURRENCIES: ReadonlySet<string> = new Set(
  (
    'aed afn all amd aoa ars aud awg azn bam bbd bdt bhd bif bmd bnd bob brl bsd bwp byn bzd cad cdf chf clp ' +
    'cny cop crc cve czk djf dkk dop dzd egp etb eur fjd fkp gbp gel gip gmd gnf gtq gyd hkd hnl htg huf idr ' +
    'ils inr isk jmd jod jpy kes kgs khr kmf krw kwd kyd kzt lak lbp lkr lrd lsl mad mdl mga mkd mmk mnt mop ' +
    'mur mvr mwk mxn myr mzn nad ngn nio nok npr nzd omr pab pen pgk php pkr pln pyg qar ron rsd rub rwf sar ' +
    'sbd scr sek sgd shp sle sos srd szl thb tjs tnd top try ttd twd tzs uah ugx usd uyu uzs vnd vuv wst xaf ' +
    'xcd xcg xof xpf yer zar zmw'
  ).split(' '),
);

/**
 * Stripe's minimum charge, in the currency's minor units (JPY has none: ¥50 is
 * 50). Currencies not listed here have no minimum of their own beyond 1.
 */
export const STRIPE_MINIMUM_CHARGE: Readonly<Record<string, number>> = {
  usd: 50,
  aed: 200,
  aud: 50,
  bgn: 100,
  brl: 50,
  cad: 50,
  chf: 50,
  czk: 1500,
  dkk: 250,
  eur: 50,
  gbp: 30,
  hkd: 400,
  huf: 17500,
  inr: 50,
  jpy: 50,
  mxn: 1000,
  myr: 200,
  nok: 300,
  nzd: 50,
  pln: 200,
  ron: 200,
  sek: 300,
  sgd: 50,
  thb: 1000,
};

/** The smallest amount Stripe charges in `currency` (any case), in minor units. */
export function minimumCharge(currency: string): number {
  return STRIPE_MINIMUM_CHARGE[currency.toLowerCase()] ?? 1;
}

export function isStripeCurrency(currency: string): boolean {
  return STRIPE_CURRENCIES.has(currency.toLowerCase());
}

/**
 * What a payment's `source` may be: the ids the card network issues, nothing
 * else (Stripe's ids are at most 255 characters).
 * - a test token, a word of letters (`tok_visa`, `tok_chargeDeclined`,
 *   `tok_visa_debit`), and the test PaymentMethod of the same name
 *   (`pm_card_visa`);
 * - a real card token (Stripe.js, the token API) or PaymentMethod: the prefix,
 *   a digit, then letters and digits (`tok_1N3T00LkdIwHu7ix`, `pm_1MqLiJ…`).
 * Card details never fit: a test word has no digit, a real id no separator (a
 * real id's digits may still be a card number: the DTO refuses those too).
 */
export const PAYMENT_SOURCE = /^(?:(?:tok|pm_card)_[A-Za-z]+(?:_[A-Za-z]+)*|(?:tok|pm)_[0-9][A-Za-z0-9]*)$/;
export const PAYMENT_SOURCE_MAX_LENGTH = 255;

/** A real card token (`tok_` and a digit), paid with through `payment_method_data[card][token]`. */
export const CARD_TOKEN = /^tok_[0-9][A-Za-z0-9]*$/;
