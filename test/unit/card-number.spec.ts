import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { containsCardNumber } from '../../src/common/card-number';
import { CARD_TOKEN, PAYMENT_SOURCE } from '../../src/payments/card-network/stripe-rules';

/** The Luhn check digit that completes `body`. */
function checkDigit(body: string): string {
  let sum = 0;
  for (let i = 0; i < body.length; i++) {
    let d = Number(body[body.length - 1 - i]);
    if (i % 2 === 0) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return String((10 - (sum % 10)) % 10);
}

describe('containsCardNumber', () => {
  it.each([
    '4242424242424242',
    '4242 4242 4242 4242',
    '4000-0566-5566-5556',
    '4242_4242_4242_4242',
    '4242.4242.4242.4242',
    '4242/4242/4242/4242',
    '4242 - 4242 - 4242 - 4242',
    '3782 822463 10005',
    '378282246310005',
    '4222222222222', // 13 digits
    '6011 0009 9013 9424',
    'tok_4242_4242_4242_4242',
    'tok_4111111111111111',
    'pm_5555555555554444',
    'card 4242 4242 4242 4242 exp 12/30 cvc 123',
    'Order 1001: 4242 4242 4242 4242',
    '"4242424242424242"',
    '４２４２ ４２４２ ４２４２ ４２４２', // fullwidth digits
  ])('finds a card number in %j', (text) => {
    expect(containsCardNumber(text)).toBe(true);
  });

  it.each([
    'Order #1001',
    'order-1001',
    '4242424242424241', // 16 digits, Luhn fails
    '4242 4242 4242 4241',
    '424242424242', // 12 digits
    '42424242424242424242', // 20 digits in one group
    'tok_visa',
    'tok_1N3T00LkdIwHu7ix',
    'pm_1MqLiJLkdIwHu7ixUEgbFdYF',
    'sku_tshirt_m',
    'x4242424242424242', // digits glued to a letter: part of an id
    '4242424242424242x',
    '8e03978e-40d5-43e8-bc93-6894a57f9324',
    '11526567-9425-4659-ae51-363ac20b35b6', // a UUID whose first 16 digits pass Luhn
    '',
  ])('finds none in %j', (text) => {
    expect(containsCardNumber(text)).toBe(false);
  });

  it('finds every Luhn-valid number of 13 to 19 digits, in any grouping with any separators (property)', () => {
    const separator = fc.constantFrom(' ', '-', '_', '.', '/', ' - ', ':', '|', '\u00a0');
    fc.assert(
      fc.property(
        fc.integer({ min: 12, max: 18 }).chain((n) => fc.array(fc.integer({ min: 0, max: 9 }), { minLength: n, maxLength: n })),
        fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 19 }),
        separator,
        fc.constantFrom('', 'card ', 'tok_', 'pm_', 'ref 12: '),
        (digits, sizes, sep, prefix) => {
          const body = digits.join('');
          const number = body + checkDigit(body);
          const groups: string[] = [];
          let at = 0;
          for (const size of sizes) {
            if (at >= number.length) break;
            groups.push(number.slice(at, at + size));
            at += size;
          }
          if (at < number.length) groups.push(number.slice(at));
          expect(containsCardNumber(prefix + groups.join(sep))).toBe(true);
        },
      ),
    );
  });

  it('finds none in 100,000 random UUIDs (the recommended Idempotency-Key)', () => {
    for (let i = 0; i < 100_000; i++) {
      const key = randomUUID();
      if (containsCardNumber(key)) throw new Error(`refused ${key}`);
    }
  });
});

describe('payment source shapes', () => {
  it.each(['tok_visa', 'tok_chargeDeclined', 'tok_chargeDeclinedInsufficientFunds', 'tok_visa_debit', 'tok_1N3T00LkdIwHu7ix', 'pm_card_visa', 'pm_card_chargeDeclined', 'pm_1MqLiJLkdIwHu7ixUEgbFdYF'])(
    'accepts %s',
    (source) => {
      expect(PAYMENT_SOURCE.test(source)).toBe(true);
    },
  );

  it.each(['tok_4242_4242_4242_4242', 'tok_', 'tok_visa1', 'tok_visa_', 'tok__visa', 'pm_card_', 'pm_visa', 'pm_card_4242', 'card_1abc', '4242424242424242', 'tok_1abc-def', 'tok_1 abc'])(
    'refuses %s',
    (source) => {
      expect(PAYMENT_SOURCE.test(source)).toBe(false);
    },
  );

  it('tells a real card token from a test word', () => {
    expect(CARD_TOKEN.test('tok_1N3T00LkdIwHu7ix')).toBe(true);
    expect(CARD_TOKEN.test('tok_visa')).toBe(false);
  });
});
