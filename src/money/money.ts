import { ValidationOptions, registerDecorator } from 'class-validator';

/**
 * Money is an integer number of minor units (cents) with a lower-case ISO 4217
 * currency code. Amounts never pass through floats or strings in the API.
 */
export const MAX_AMOUNT = 99_999_999;

/**
 * ISO 4217 currencies in circulation (late 2026), lower-case: what a card can be
 * charged in. Left out on purpose: precious metals (xau, xag, xpt, xpd), funds and
 * units of account (xdr, xsu, xua, xba..xbd, bov, che, chw, clf, cou, mxv, usn, uyi,
 * uyw), the testing and "no currency" codes (xts, xxx), and withdrawn currencies
 * (cuc, sll, zwl, hrk, vef, mro, std, ang, and bgn since Bulgaria's euro in 2026).
 */
const ISO_4217 = new Set(
  (
    'aed afn all amd aoa ars aud awg azn bam bbd bdt bhd bif bmd bnd bob brl bsd btn bwp byn bzd cad cdf ' +
    'chf clp cny cop crc cup cve czk djf dkk dop dzd egp ern etb eur fjd fkp gbp gel ghs gip gmd gnf gtq ' +
    'gyd hkd hnl htg huf idr ils inr iqd irr isk jmd jod jpy kes kgs khr kmf kpw krw kwd kyd kzt lak lbp ' +
    'lkr lrd lsl lyd mad mdl mga mkd mmk mnt mop mru mur mvr mwk mxn myr mzn nad ngn nio nok npr nzd omr ' +
    'pab pen pgk php pkr pln pyg qar ron rsd rub rwf sar sbd scr sdg sek sgd shp sle sos srd ssp stn svc ' +
    'syp szl thb tjs tmt tnd top try ttd twd tzs uah ugx usd uyu uzs ved ves vnd vuv wst xaf xcd xcg xof ' +
    'xpf yer zar zmw zwg'
  ).split(' '),
);

export function isCurrency(value: unknown): value is string {
  return typeof value === 'string' && ISO_4217.has(value.toLowerCase());
}

/** Validates a 3-letter ISO 4217 code in any case (normalise with toLowerCase). */
export function IsCurrency(options?: ValidationOptions): PropertyDecorator {
  return (target, propertyName) =>
    registerDecorator({
      name: 'isCurrency',
      target: target.constructor,
      propertyName: propertyName as string,
      options: { message: '$property must be a 3-letter ISO 4217 currency code', ...options },
      validator: { validate: (value: unknown) => isCurrency(value) },
    });
}

/** bigint columns come back from node-postgres as strings; our amounts fit in 2^53. */
export const bigintToNumber = {
  to: (value: number | null | undefined) => value,
  from: (value: string | null) => (value === null ? null : Number(value)),
};
