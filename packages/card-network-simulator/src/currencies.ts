/**
 * Stripe's facts about money, as the network enforces them: the currencies a
 * PaymentIntent can be created in and the smallest amount charged in each.
 * The service keeps its own copy for its request validation (it must not load
 * a development tool in production, nor the tool the service); a unit test of
 * the service compares the two tables, so they cannot drift apart.
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
 * 50). A currency not listed here has no minimum of its own beyond 1.
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
