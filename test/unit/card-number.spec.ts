import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { CARD_BRANDS, cardBrandOf, passesGtinCheck } from '../../src/card-numbers/card-brands';
import { REDACTED_CARD_NUMBER, containsCardNumber, hasLuhnWindow, redactCardNumbers } from '../../src/card-numbers/card-number';
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
/** The ASCII digits of `number`, the i-th written in the digit set whose zero is `zeros[i]`. */
const inSets = (number: string, zeros: number[]) => [...number].map((d, i) => String.fromCodePoint(zeros[i] + Number(d))).join('');
/** The digits of `text`, of any Unicode digit set, in ASCII; everything else left out. */
const asciiDigits = (text: string) => [...text].map((c) => (/\p{Nd}/u.test(c) ? String(c.codePointAt(0)! - DIGIT_SETS.find((zero) => c.codePointAt(0)! - zero <= 9 && c.codePointAt(0)! >= zero)!) : '')).join('');
/** `number` cut into groups of the sizes given, taken in turn (a size of 19: one group). */
function groupsOf(number: string, sizes: readonly number[]): string[] {
  const groups: string[] = [];
  for (let at = 0, k = 0; at < [...number].length; k++) {
    groups.push([...number].slice(at, at + sizes[k % sizes.length]).join(''));
    at += sizes[k % sizes.length];
  }
  return groups;
}
/** A number of some brand (CARD_BRANDS): one of its prefixes, random digits to one of its lengths, the Luhn check digit; not a GTIN. */
const cardNumber = fc
  .constantFrom(...CARD_BRANDS)
  .chain((brand) =>
    fc.record({
      prefix: fc.constantFrom(...brand.prefixes).chain((range) => {
        const [lo, hi = lo] = range.split('-');
        return fc.integer({ min: Number(lo), max: Number(hi) }).map(String);
      }),
      length: fc.constantFrom(...brand.lengths),
      rest: fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 19, maxLength: 19 }),
    }),
  )
  .map(({ prefix, length, rest }) => {
    const body = (prefix + rest.join('')).slice(0, length - 1);
    return body + checkDigit(body);
  })
  .filter((number) => !passesGtinCheck([...number].map(Number)));

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
    '1 4242424242424242', // one group: a number of its own
    'Order 1001: 4242-4242-4242-4242, 2 items', // the joint changes where the number starts and ends
    '4242424242424242 12/30 123',
    '4242\u00ad4242\u200b4242\u20604242', // invisible characters join nothing apart
    '＋4242 4242 4242 4242', // after a plus sign, but 16 digits: no telephone number
    '6759 6498 2643 8453', // Maestro
    '2200 0000 0000 0004', // Mir
    '3530 1113 3330 0000', // JCB
    '6205500000000000004', // UnionPay, 19 digits
    '3622 720627 1667', // Diners Club, 14 digits
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
    // Honest values (each refused by a rule that tests every window of a run):
    'tracking 9400 1000 0000 0000 0000 00', // 22 digits: no brand is that long
    'call +86 138 0007 8000',
    'Invoice 2026-12-05 #100005',
    '1797292800000', // a millisecond timestamp: passes Luhn, no brand starts with 1
    'order-1764979200000-7',
    '4006381333924', // an EAN-13 SKU: a Visa prefix and length, passes Luhn, and its GTIN check digit
    '+49 151 1234 5611', // a telephone number: a Visa prefix and length, passes Luhn, after a plus sign
    'user-407-1764979200000', // passes Luhn as 16 digits with a Visa prefix, but written 3-13: not as a card is
    '4242424242424250', // Visa's prefix and length, fails Luhn
    '1234567812345670', // passes Luhn, no brand's prefix
    // A card number's digits inside a longer run or group are not a card number written (redactCardNumbers still hides them):
    '42424242424242424242',
    '4242424242 4242424242',
    '4242 4242 4242 4242 1234 5678 9012 3456',
    '9 8 7 6 5 4 3 2 1 4242 4242 4242 4242 1 2 3 4 5 6 7 8 9',
    'key-0000-4242-4242-4242-4242-0000',
    '+378282246310005', // 15 digits right after a plus sign are a telephone number (E.164), even a card's
  ])('finds none in %j', (text) => {
    expect(containsCardNumber(text)).toBe(false);
  });

  it("finds every number with a brand's prefix and length that passes Luhn, in any grouping of at most 6 with any separator (property)", () => {
    const separator = fc.constantFrom(' ', '-', '_', '.', '/', ' - ', ':', '|', '\u00a0', '\u2013', '\u3000');
    const sizes = fc.oneof(fc.constant([19]), fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 5 }));
    fc.assert(
      fc.property(cardNumber, sizes, separator, fc.constantFrom('', 'card ', 'tok_', 'pm_', 'ref 12: ', 'Order 1001: ', '"'), (number, sizes, sep, prefix) => {
        expect(containsCardNumber(prefix + groupsOf(number, sizes).join(sep) + (prefix === '"' ? '"' : ' exp 12/30'))).toBe(true);
      }),
    );
  });

  it('finds every such number written in any Unicode digit sets mixed, in groups of 4 joined by any spelling of one separator (property)', () => {
    const kinds = [[''], ['-', '\u2010', '\u2013', '\u2014', '\u2212', '\uff0d'], [' ', '\u00a0', '\u2009', '\u3000', '\u202f'], ['\u200b', '\u00ad', '\u2060']];
    fc.assert(
      fc.property(cardNumber, fc.array(fc.constantFrom(...DIGIT_SETS), { minLength: 19, maxLength: 19 }), fc.constantFrom(...kinds), fc.array(fc.nat(), { minLength: 5, maxLength: 5 }), (number, sets, kind, picks) => {
        const text = groupsOf(inSets(number, sets), [4]).map((group, i) => (i === 0 ? '' : kind[picks[i] % kind.length]) + group).join('');
        expect(containsCardNumber(text)).toBe(true);
      }),
    );
  });

  it('finds none in a number no brand starts with, of any length, in any grouping (property)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('0', '1', '7', '8', '9'),
        fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 11, maxLength: 30 }),
        fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 5 }),
        fc.constantFrom(' ', '-', '', '.'),
        (first, digits, sizes, sep) => {
          expect(containsCardNumber(groupsOf(first + digits.join(''), sizes).join(sep))).toBe(false);
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
    // Wider than a refusal: a Luhn window inside a longer run or group, of any brand or none.
    ['ref 0000 0000 4000 0025 0000 3155 1234 5678 9012', `ref 00${REDACTED_CARD_NUMBER}`],
    ['key 12345678904000056655665556', `key 1${REDACTED_CARD_NUMBER}`],
    ['at 1797292800000', `at ${REDACTED_CARD_NUMBER}`],
  ])('%j becomes %j', (text, redacted) => {
    expect(redactCardNumbers(text)).toBe(redacted);
  });

  it('leaves no card number and no Luhn window behind, and nothing else changed outside them (property)', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('4', '2', '1', '0', '5', '6', '3', ' ', '-', '+', 'a', '٤', '२', '\u2013'), maxLength: 60 }), (text) => {
        const redacted = redactCardNumbers(text);
        expect(hasLuhnWindow(redacted)).toBe(false);
        expect(containsCardNumber(redacted)).toBe(false);
        if (containsCardNumber(text)) expect(hasLuhnWindow(text)).toBe(true);
        if (!hasLuhnWindow(text)) expect(redacted).toBe(text);
      }),
    );
  });

  it('hides every Luhn-valid number of 12 to 19 digits in any Unicode digit sets mixed, inside a longer run of digits (property)', () => {
    const digit = fc.integer({ min: 0, max: 9 });
    fc.assert(
      fc.property(
        fc.integer({ min: 11, max: 18 }).chain((n) => fc.array(digit, { minLength: n, maxLength: n })),
        fc.array(digit, { maxLength: 10 }),
        fc.array(digit, { maxLength: 10 }),
        fc.array(fc.constantFrom(...DIGIT_SETS), { minLength: 40, maxLength: 40 }),
        fc.constantFrom('', ' ', '-', '\u2013', '\u00a0', '.'),
        (digits, before, after, sets, sep) => {
          const body = digits.join('');
          const all = [...before.map(String), ...(body + checkDigit(body)), ...after.map(String)];
          const text = all.map((d, i) => String.fromCodePoint(sets[i] + Number(d)) + (i % 4 === 3 ? sep : '')).join('');
          expect(hasLuhnWindow(text)).toBe(true);
          const redacted = redactCardNumbers(text);
          expect(hasLuhnWindow(redacted)).toBe(false);
          expect(asciiDigits(redacted)).not.toContain(body + checkDigit(body));
        },
      ),
    );
  });
});

describe('card brands', () => {
  it.each([
    ['4242424242424242', 'Visa'],
    ['4222222222222', 'Visa'],
    ['5555555555554444', 'Mastercard'],
    ['2223003122003222', 'Mastercard'],
    ['378282246310005', 'American Express'],
    ['6011000990139424', 'Discover'],
    ['3566002020360505', 'JCB'],
    ['36227206271667', 'Diners Club'],
    ['6200000000000005', 'UnionPay'],
    ['6759649826438453', 'Maestro'],
    ['2200000000000004', 'Mir'],
    ['4242424242424', 'Visa'],
    ['42424242424242', undefined], // Visa is 13, 16 or 19 digits
    ['5555555555555', undefined], // Mastercard is 16
    ['7000000000000000', undefined],
  ])('%s is %s', (number, brand) => {
    expect(cardBrandOf([...number].map(Number))?.name).toBe(brand);
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
