/**
 * Card tokens as Stripe.js makes them (POST /v1/tokens with `card[...]`), and
 * what a token does once it pays: each test card number behaves like one of the
 * simulator's test payment methods, any other well-formed number charges.
 *
 * Card data: the number is read once, when the token is made, and only its last
 * four digits are kept (in the token, as Stripe shows them). No answer, error
 * or saved Idempotency-Key result carries it.
 *
 * A token pays once (Stripe's "You cannot use a Stripe token more than once"),
 * except Stripe's fixed test tokens (`tok_visa`, `tok_chargeDeclined`, ...), which
 * stand for a fresh token on every use.
 */
import type { Cause, Outcome } from './account';
import { ErrorBody, invalid, noSuch, stripeId, unixSeconds } from './api';
import { Call, form, Route } from './call';
import { acceptPost } from './idempotency';
import { ParsedParams, parseParams } from './params';
import type { CardToken, TokenRecord } from './resources';
import { sendJson } from './reply';

export const TOKEN_PARAMS = ['card[number]', 'card[exp_month]', 'card[exp_year]', 'card[cvc]'] as const;

/** Where PaymentIntent create takes a token: Stripe's `payment_method_data[card][token]`. */
export const TOKEN_PARAM = 'payment_method_data[card][token]';

/** Stripe's test card numbers, by the test payment method each one behaves like. */
const TEST_NUMBERS: Readonly<Record<string, string>> = {
  '4242424242424242': 'pm_card_visa',
  '5555555555554444': 'pm_card_mastercard',
  '378282246310005': 'pm_card_amex',
  '4000000000000002': 'pm_card_chargeDeclined',
  '4000000000009995': 'pm_card_chargeDeclinedInsufficientFunds',
  '4000000000000119': 'pm_card_processingError',
  '4000002500003155': 'pm_card_authenticationRequired',
  '4000000000007726': 'pm_card_refundPending',
  '4000000000005126': 'pm_card_refundFail',
};

const BRANDS: [RegExp, string][] = [
  [/^4/, 'Visa'],
  [/^(5[1-5]|2[2-7])/, 'MasterCard'],
  [/^3[47]/, 'American Express'],
  [/^(6011|65|64[4-9])/, 'Discover'],
  [/^3(0[0-5]|[689])/, 'Diners Club'],
  [/^35/, 'JCB'],
  [/^62/, 'UnionPay'],
];

function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return sum % 10 === 0;
}

function cardError(code: string, param: string, message: string): { error: ErrorBody } {
  return { error: { type: 'card_error', code, param, message } };
}

/**
 * Reads the form (a missing field is a 400 that leaves no trace), and returns what
 * making the token does: the token, or the 402 card_error Stripe answers for a
 * number, expiry or CVC it refuses.
 */
export function prepareToken(values: ReadonlyMap<string, string>): (now: Date) => { record: TokenRecord } | { error: ErrorBody } {
  for (const name of ['card[number]', 'card[exp_month]', 'card[exp_year]']) {
    const value = values.get(name);
    if (value === undefined) throw invalid(`Missing required param: ${name}.`, 'parameter_missing', name);
    if (value === '') throw invalid(`You passed an empty string for '${name}'.`, 'parameter_invalid_empty', name);
  }
  const number = values.get('card[number]')!.replace(/ /g, '');
  const rawMonth = values.get('card[exp_month]')!;
  const rawYear = values.get('card[exp_year]')!;
  const cvc = values.get('card[cvc]');
  return (now) => {
    if (!/^\d{13,19}$/.test(number) || !luhn(number)) return cardError('incorrect_number', 'number', 'Your card number is incorrect.');
    const month = /^\d{1,2}$/.test(rawMonth) ? Number(rawMonth) : 0;
    const year = /^\d{2}$/.test(rawYear) ? 2000 + Number(rawYear) : /^\d{4}$/.test(rawYear) ? Number(rawYear) : 0;
    const thisYear = now.getUTCFullYear();
    if (month < 1 || month > 12) return cardError('invalid_expiry_month', 'exp_month', "Your card's expiration month is invalid.");
    if (year < thisYear || year > thisYear + 50) return cardError('invalid_expiry_year', 'exp_year', "Your card's expiration year is invalid.");
    if (year === thisYear && month < now.getUTCMonth() + 1) return cardError('invalid_expiry_month', 'exp_month', "Your card's expiration month is invalid.");
    if (cvc !== undefined && !/^\d{3,4}$/.test(cvc)) return cardError('invalid_cvc', 'cvc', "Your card's security code is invalid.");
    const token: CardToken = {
      id: stripeId('tok_'),
      object: 'token',
      card: {
        id: stripeId('card_'),
        object: 'card',
        brand: BRANDS.find(([prefix]) => prefix.test(number))?.[1] ?? 'Unknown',
        country: 'US',
        cvc_check: cvc === undefined ? null : 'unchecked',
        exp_month: month,
        exp_year: year,
        funding: 'credit',
        last4: number.slice(-4),
        metadata: {},
        name: null,
      },
      client_ip: null,
      created: unixSeconds(),
      livemode: false,
      type: 'card',
      used: false,
    };
    return { record: { token, method: TEST_NUMBERS[number] ?? 'pm_card_visa' } };
  };
}

/**
 * The test payment method a token pays like, refusing an unknown or spent one
 * (400, `param: payment_method_data[card][token]`); `spend()` uses it up.
 */
export function redeemToken(
  tokens: ReadonlyMap<string, TokenRecord>,
  id: string,
  isTestMethod: (method: string) => boolean,
): { method: string; spend: () => void } {
  const record = tokens.get(id);
  if (record) {
    if (record.token.used) throw invalid(`You cannot use a Stripe token more than once: ${id}.`, 'token_already_used', TOKEN_PARAM);
    return { method: record.method, spend: () => void (record.token.used = true) };
  }
  const fixed = id.startsWith('tok_') ? `pm_card_${id.slice(4)}` : '';
  if (isTestMethod(fixed)) return { method: fixed, spend: () => undefined };
  throw noSuch('token', id, TOKEN_PARAM);
}

/** POST /v1/tokens: a token, or the 402 card_error of a card the network refuses (saved like a decline). */
function createToken(cause: Cause, params: ParsedParams): () => Outcome {
  const make = prepareToken(params.values);
  return () => {
    const made = make(new Date());
    if ('error' in made) return { status: 402, body: made, save: true };
    cause.account.tokens.set(made.record.token.id, made.record);
    return { status: 200, body: made.record.token, save: true };
  };
}

function create(call: Call): void {
  const params = parseParams(form(call), TOKEN_PARAMS, false);
  acceptPost(call, params, (cause) => createToken(cause, params));
}

function retrieve(call: Call, match: RegExpExecArray): void {
  parseParams(call.query, [], false);
  const id = decodeURIComponent(match[1]);
  const found = call.account.tokens.get(id)?.token;
  if (!found) throw noSuch('token', id, 'id', 404);
  sendJson(call.res, 200, found);
}

export const TOKEN_ROUTES: readonly Route[] = [
  { pattern: /^\/v1\/tokens$/, handlers: { POST: create } },
  { pattern: /^\/v1\/tokens\/([^/]+)$/, handlers: { GET: retrieve } },
];
