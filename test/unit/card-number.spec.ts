import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { REDACTED_CARD_NUMBER, containsCardNumber, redactCardNumbers } from '../../src/common/card-number';
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

/** `text` with its ASCII digits written in the digit system whose zero is `zero`. */
const inDigits = (text: string, zero: number) => text.replace(/[0-9]/g, (d) => String.fromCodePoint(zero + Number(d)));
const ARABIC_INDIC = 0x660;
const EXTENDED_ARABIC_INDIC = 0x6f0;
const DEVANAGARI = 0x966;
const BENGALI = 0x9e6;
const THAI = 0xe50;
const FULLWIDTH = 0xff10;
const MATHEMATICAL_MONOSPACE = 0x1d7f6;
/** The zeros of some Unicode digit sets (every set of `\p{Nd}` is ten code points from its zero). */
const DIGIT_SETS = [0x30, ARABIC_INDIC, EXTENDED_ARABIC_INDIC, DEVANAGARI, BENGALI, THAI, 0x1040, 0x17e0, FULLWIDTH, 0x104a0, 0x1d7ce, MATHEMATICAL_MONOSPACE];

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
    inDigits('4242424242424242', ARABIC_INDIC),
    inDigits('4242 4242 4242 4242', EXTENDED_ARABIC_INDIC),
    inDigits('4000-0566-5566-5556', DEVANAGARI),
    `4242${inDigits('4242', ARABIC_INDIC)}4242${inDigits('4242', DEVANAGARI)}`, // mixed with ASCII
    inDigits('5555 5555 5555 4444', MATHEMATICAL_MONOSPACE),
    '4242\u20134242\u20144242\u22124242', // en dash, em dash, minus sign
    '4242\u20094242\u30004242\u202f4242', // thin, ideographic and narrow no-break spaces
    '4242\u200b4242\u200b4242\u200b4242', // zero-width spaces
    '４２４２-4242-४२४२-٤٢٤٢',
    '42424242424242424242', // a card number inside a longer group
    '4242424242 4242424242', // ... across groups longer than it
    '4242 4242 4242 4242 1234 5678 9012 3456', // followed by a long tail of groups
    '9 8 7 6 5 4 3 2 1 4242 4242 4242 4242 1 2 3 4 5 6 7 8 9',
    '1 4242424242424242',
    'key-0000-4242-4242-4242-4242-0000',
  ])('finds a card number in %j', (text) => {
    expect(containsCardNumber(text)).toBe(true);
  });

  it.each([
    'Order #1001',
    'order-1001',
    '1234567812345678', // 16 digits, no window of them passes Luhn
    '1234 5678 1234 5678',
    '424242424242', // 12 digits
    inDigits('1234567812345678', ARABIC_INDIC), // no window passes Luhn
    inDigits('424242424242', DEVANAGARI), // 12 digits
    'x' + inDigits('4242424242424242', DEVANAGARI), // glued to a letter
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

  it('finds every Luhn-valid number written in any Unicode digit set, the sets mixed, inside a longer run of digits (property)', () => {
    const digit = fc.integer({ min: 0, max: 9 });
    fc.assert(
      fc.property(
        fc.integer({ min: 12, max: 18 }).chain((n) => fc.array(digit, { minLength: n, maxLength: n })),
        fc.array(digit, { maxLength: 10 }),
        fc.array(digit, { maxLength: 10 }),
        fc.array(fc.constantFrom(...DIGIT_SETS), { minLength: 40, maxLength: 40 }),
        fc.constantFrom('', ' ', '-', '\u2013', '\u00a0', '.'),
        (digits, before, after, sets, sep) => {
          const body = digits.join('');
          const all = [...before.map(String), ...(body + checkDigit(body)), ...after.map(String)];
          const text = all.map((d, i) => String.fromCodePoint(sets[i] + Number(d)) + (i % 4 === 3 ? sep : '')).join('');
          expect(containsCardNumber(text)).toBe(true);
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

describe('redactCardNumbers', () => {
  it.each([
    ['No resource 4242-4242-4242-4242.', `No resource ${REDACTED_CARD_NUMBER}.`],
    ['/orders?q=4242424242424242&limit=5', `/orders?q=${REDACTED_CARD_NUMBER}&limit=5`],
    [`pay ${inDigits('4242 4242 4242 4242', ARABIC_INDIC)} now`, `pay ${REDACTED_CARD_NUMBER} now`],
    ['a 4242424242424242 b 5555555555554444 c', `a ${REDACTED_CARD_NUMBER} b ${REDACTED_CARD_NUMBER} c`],
    ['Order #1001, ref 2024-0042', 'Order #1001, ref 2024-0042'],
    ['8e03978e-40d5-43e8-bc93-6894a57f9324', '8e03978e-40d5-43e8-bc93-6894a57f9324'],
  ])('%j becomes %j', (text, redacted) => {
    expect(redactCardNumbers(text)).toBe(redacted);
  });

  it('leaves no card number behind, and nothing else changed outside it (property)', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('4', '2', '1', '0', '5', ' ', '-', 'a', '٤', '२', '\u2013') , maxLength: 60 }), (text) => {
        const redacted = redactCardNumbers(text);
        expect(containsCardNumber(redacted)).toBe(false);
        if (!containsCardNumber(text)) expect(redacted).toBe(text);
      }),
    );
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
