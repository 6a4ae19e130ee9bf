import { ValidationOptions, registerDecorator } from 'class-validator';

/**
 * Card numbers (PANs) are card data: a value holding one must reach no table,
 * no log and no outside service (PCI DSS scope). A card number here is 13 to 19
 * digits that pass the Luhn check, written bare or in groups with any
 * separators between them (spaces, dashes, underscores, dots, slashes, ...):
 * `4242424242424242`, `4242 4242 4242 4242`, `tok_4242_4242_4242_4242`.
 *
 * Letters end a number: a digit group glued to a letter is part of a word or an
 * id (`tok_1N3T00LkdIwHu7ix`, hex), not a card number written by a person. A
 * number may start after other groups (`Order 1001: 4242 4242 4242 4242`), so
 * every run of whole groups is tried. A UUID (8-4-4-4-12 hex digits) is never
 * a card number: it is the recommended Idempotency-Key, and 1 random UUID in
 * about 7,500 would otherwise hold 13+ digits between its dashes that pass Luhn.
 */
const CARD_DIGITS = { min: 13, max: 19 };
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
const DIGIT_GROUP = /[0-9]+/g;
const LETTER = /\p{L}/u;

function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return sum % 10 === 0;
}

const isLetter = (char: string | undefined) => char !== undefined && LETTER.test(char);

/** Whether `text` holds a card number (see above). Fullwidth and other compatibility digits count as digits. */
export function containsCardNumber(text: string): boolean {
  // NFKC: fullwidth digits (U+FF10..) become ASCII digits; a UUID becomes one letter.
  const normalized = text.normalize('NFKC').replace(UUID, 'u');
  const groups = [...normalized.matchAll(DIGIT_GROUP)].map((m) => ({ digits: m[0], start: m.index, end: m.index + m[0].length }));
  for (let first = 0; first < groups.length; first++) {
    if (isLetter(normalized[groups[first].start - 1])) continue;
    let digits = '';
    for (let last = first; last < groups.length; last++) {
      // Only separators between the groups of one number: a letter ends it.
      if (last > first && LETTER.test(normalized.slice(groups[last - 1].end, groups[last].start))) break;
      digits += groups[last].digits;
      if (digits.length > CARD_DIGITS.max) break;
      if (digits.length >= CARD_DIGITS.min && !isLetter(normalized[groups[last].end]) && luhn(digits)) return true;
    }
  }
  return false;
}

/**
 * Refuses a string holding a card number (containsCardNumber). The message
 * names the field only: the refused value is never echoed.
 */
export function NoCardNumber(options?: ValidationOptions): PropertyDecorator {
  return (target, propertyName) =>
    registerDecorator({
      name: 'noCardNumber',
      target: target.constructor,
      propertyName: propertyName as string,
      options: { message: '$property must not contain a card number', ...options },
      validator: { validate: (value: unknown) => typeof value !== 'string' || !containsCardNumber(value) },
    });
}
