import { ValidationOptions, registerDecorator } from 'class-validator';
import { CARD_BRANDS, CARD_LENGTHS, CardBrand, cardBrandOf, passesGtinCheck, passesLuhn } from './card-brands';
import { DigitRun, Units, countDigitLike, digitRuns, unitsOf } from './card-digits';

/**
 * Card numbers (PANs) are card data: a value holding one must reach no table,
 * no log, no response and no outside service (PCI DSS scope). Two rules, each
 * for its use (how a text is read into runs of digit groups:
 * src/card-numbers/card-digits.ts):
 *
 * - **A refusal** (containsCardNumber: `@NoCardNumber()`, the Idempotency-Key
 *   guard) takes only a number written as one: a run of groups joined by one
 *   and the same joint (`4242 4242 4242 4242`, `4000-0566-5566-5556`; every
 *   group at most 6 digits, as cards are printed), or one group
 *   (`4242424242424242`), that has a card brand's prefix and that brand's
 *   length (card-brands.ts) and passes Luhn. A window inside a longer run or
 *   group is not one, nor a number that passes the GS1 check of a GTIN-12/13/14
 *   (a product's number), nor one of at most 15 digits right after `+` (a
 *   telephone number, E.164). So `Order 1001: 4242 4242 4242 4242` is refused
 *   (the joint changes at `: `), and a tracking number, a phone number, a
 *   timestamp or an EAN-13 SKU are accepted.
 * - **Redaction** (redactCardNumbers, hasLuhnWindow: logs and echoes) stays
 *   wide: every window of 12 to 19 consecutive digits of a run that passes Luhn,
 *   wherever the groups split it, brand or not. Whatever a refusal would find
 *   is such a window, so nothing refused is ever echoed.
 */
/** What a found card number becomes in a value that is echoed or logged (redactCardNumbers). */
export const REDACTED_CARD_NUMBER = '[card number]';
/** Cards are printed in groups of 4, 4-6-5 or 4-6-4: a longer group in a run of several is not part of one. */
const LONGEST_GROUP = 6;
/** E.164 numbers have at most 15 digits. */
const LONGEST_PHONE_NUMBER = 15;

/** The candidates of a run, as [first, end) ranges of its digits: each group, and each longest chain of groups with one joint. */
function writtenNumbers(run: DigitRun): [number, number][] {
  const found = run.groups.map(([first, end]): [number, number] => [first, end]);
  for (let a = 0; a < run.joints.length; ) {
    let b = a;
    while (b + 1 < run.joints.length && run.joints[b + 1] === run.joints[a]) b++;
    const groups = run.groups.slice(a, b + 2);
    if (groups.every(([first, end]) => end - first <= LONGEST_GROUP)) found.push([groups[0][0], groups[groups.length - 1][1]]);
    a = b + 1;
  }
  return found;
}

/** Whether the code point before the one at `index` is a plus sign (`+`, fullwidth or small). */
function afterPlus(units: Units, index: number): boolean {
  return index > 0 && units.text.slice(units.starts[index - 1], units.starts[index]).normalize('NFKC') === '+';
}

/** Whether `text` holds a card number by the refusal rule (see above), checked against `brands`. */
export function containsCardNumberOf(text: string, brands: readonly CardBrand[]): boolean {
  if (countDigitLike(text, CARD_LENGTHS.min) < CARD_LENGTHS.min) return false;
  const units = unitsOf(text);
  return digitRuns(units, CARD_LENGTHS.min).some((run) =>
    writtenNumbers(run).some(([first, end]) => {
      const digits = run.digits.slice(first, end).map((i) => units.values[i]);
      if (digits.length < CARD_LENGTHS.min || !passesLuhn(digits) || cardBrandOf(digits, brands) === undefined) return false;
      if (passesGtinCheck(digits)) return false;
      return !(digits.length <= LONGEST_PHONE_NUMBER && afterPlus(units, run.digits[first]));
    }),
  );
}

/** Whether `text` holds a card number: the refusal rule (see above). */
export function containsCardNumber(text: string): boolean {
  return containsCardNumberOf(text, CARD_BRANDS);
}

/**
 * The windows of `digits` that pass Luhn, as [first, last] indexes (only the
 * first found when `firstOnly`). Prefix sums of the digits, doubled on even or
 * on odd indexes, give each window's Luhn sum at once (a window's doubled
 * digits are every second one from its end), so a long run costs 8 additions
 * per digit.
 */
function luhnWindows(digits: number[], firstOnly: boolean): [number, number][] {
  const doubled = (d: number) => (d * 2 > 9 ? d * 2 - 9 : d * 2);
  const sums = [new Array<number>(digits.length + 1).fill(0), new Array<number>(digits.length + 1).fill(0)];
  digits.forEach((d, i) => {
    sums[0][i + 1] = sums[0][i] + (i % 2 === 0 ? doubled(d) : d);
    sums[1][i + 1] = sums[1][i] + (i % 2 === 1 ? doubled(d) : d);
  });
  const found: [number, number][] = [];
  for (let last = CARD_LENGTHS.min - 1; last < digits.length; last++) {
    // The digit at `last` is not doubled: those of the other parity are.
    const sum = sums[1 - (last % 2)];
    for (let length = CARD_LENGTHS.min; length <= CARD_LENGTHS.max && length <= last + 1; length++) {
      const first = last - length + 1;
      if ((sum[last + 1] - sum[first]) % 10 === 0) {
        found.push([first, last]);
        if (firstOnly) return found;
      }
    }
  }
  return found;
}

/** The [start, end) spans of `text` that are Luhn windows, in order, overlapping ones merged (only the first found when `firstOnly`). */
function luhnWindowSpans(text: string, firstOnly = false): [number, number][] {
  if (countDigitLike(text, CARD_LENGTHS.min) < CARD_LENGTHS.min) return [];
  const spans: [number, number][] = [];
  const units = unitsOf(text);
  for (const run of digitRuns(units, CARD_LENGTHS.min)) {
    const windows = luhnWindows(
      run.digits.map((i) => units.values[i]),
      firstOnly,
    );
    for (const [first, last] of windows) spans.push([units.starts[run.digits[first]], units.starts[run.digits[last] + 1]]);
    if (firstOnly && spans.length > 0) return spans;
  }
  spans.sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const span of spans) {
    const previous = merged[merged.length - 1];
    if (previous && span[0] <= previous[1]) previous[1] = Math.max(previous[1], span[1]);
    else merged.push([...span]);
  }
  return merged;
}

/** Whether `text` holds a 12-19-digit Luhn window (see above): what redactCardNumbers replaces. */
export function hasLuhnWindow(text: string): boolean {
  return luhnWindowSpans(text, true).length > 0;
}

/**
 * `text` with every Luhn window in it (hasLuhnWindow) replaced by
 * REDACTED_CARD_NUMBER, for a value that is echoed or logged: from its first
 * digit to its last, separators between them included.
 */
export function redactCardNumbers(text: string): string {
  const spans = luhnWindowSpans(text);
  if (spans.length === 0) return text;
  let out = '';
  let at = 0;
  for (const [start, end] of spans) {
    out += text.slice(at, start) + REDACTED_CARD_NUMBER;
    at = end;
  }
  return out + text.slice(at);
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
