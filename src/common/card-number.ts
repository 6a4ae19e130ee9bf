import { ValidationOptions, registerDecorator } from 'class-validator';

/**
 * Card numbers (PANs) are card data: a value holding one must reach no table,
 * no log, no response and no outside service (PCI DSS scope). A card number
 * here is 13 to 19 digits that pass the Luhn check, found anywhere inside a run
 * of digits:
 *
 * - A digit is any Unicode decimal digit (`\p{Nd}`: ASCII, Arabic-Indic,
 *   Devanagari, fullwidth, ... mixed freely) or a character whose compatibility
 *   form is one (`²`, `①`).
 * - A run is digit groups joined by separators: anything that is neither a
 *   letter nor a digit (spaces, dashes, dots, underscores, slashes, their
 *   Unicode variants, invisible characters). A letter ends a run, and a group
 *   glued to a letter is part of a word or an id (`tok_1N3T00LkdIwHu7ix`, hex),
 *   not a number written by a person: it ends a run too.
 * - Every window of 13 to 19 consecutive digits of a run is tested, wherever
 *   the groups split it: `Order 1001: 4242 4242 4242 4242`, a number with more
 *   groups after it, a number inside a longer group. A run of 20 digits or more
 *   is therefore almost always refused (it has 35+ windows, each passing Luhn
 *   one time in ten): card data scanners make the same call.
 *
 * A UUID (8-4-4-4-12 hex digits) is never a card number: it is the recommended
 * Idempotency-Key and request id, and 1 random UUID in about 7,500 would
 * otherwise hold digits between its dashes that pass Luhn.
 */
const CARD_DIGITS = { min: 13, max: 19 };
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
const DECIMAL_DIGIT = /^\p{Nd}$/u;
const LETTER = /^\p{L}$/u;
/** What may be a digit: fewer than 13 of these, and there is no card number to look for. */
const DIGIT_LIKE = /^[\p{Nd}\p{No}]$/u;
/** What a found card number becomes in a value that is echoed or logged (redactCardNumbers). */
export const REDACTED_CARD_NUMBER = '[card number]';

const LETTER_CLASS = -1;
const SEPARATOR_CLASS = -2;

/** The code points of a text: each one's digit value (0-9), LETTER_CLASS or SEPARATOR_CLASS, and where it starts. */
interface Units {
  values: number[];
  /** starts[i] is where code point i starts in the text; starts[length] is the text's length. */
  starts: number[];
}

/**
 * The value of a decimal digit: Unicode encodes every set of decimal digits as
 * 10 contiguous code points from 0 to 9, and sets that touch are whole sets, so
 * the distance from the first code point of its contiguous run, modulo 10.
 */
function decimalValue(codePoint: number): number {
  let first = codePoint;
  while (first > 0 && DECIMAL_DIGIT.test(String.fromCodePoint(first - 1))) first--;
  return (codePoint - first) % 10;
}

function classify(codePoint: number): number {
  if (codePoint < 128) {
    if (codePoint >= 48 && codePoint <= 57) return codePoint - 48;
    return (codePoint | 32) >= 97 && (codePoint | 32) <= 122 ? LETTER_CLASS : SEPARATOR_CLASS;
  }
  const char = String.fromCodePoint(codePoint);
  if (DECIMAL_DIGIT.test(char)) return decimalValue(codePoint);
  const compatible = char.normalize('NFKC');
  if (compatible.length === 1 && compatible >= '0' && compatible <= '9') return compatible.charCodeAt(0) - 48;
  return LETTER.test(char) ? LETTER_CLASS : SEPARATOR_CLASS;
}

function unitsOf(text: string): Units {
  const uuids = [...text.matchAll(UUID)].map((m) => [m.index, m.index + m[0].length]);
  const values: number[] = [];
  const starts: number[] = [];
  let uuid = 0;
  for (let at = 0; at < text.length; ) {
    const codePoint = text.codePointAt(at)!;
    while (uuid < uuids.length && uuids[uuid][1] <= at) uuid++;
    values.push(uuid < uuids.length && at >= uuids[uuid][0] ? LETTER_CLASS : classify(codePoint));
    starts.push(at);
    at += codePoint > 0xffff ? 2 : 1;
  }
  starts.push(text.length);
  return { values, starts };
}

/** The runs of digits (see above): for each, the indexes of its digits' code points in order. */
function digitRuns({ values }: Units): number[][] {
  const runs: number[][] = [];
  let run: number[] = [];
  const end = () => {
    if (run.length >= CARD_DIGITS.min) runs.push(run);
    run = [];
  };
  for (let i = 0; i < values.length; ) {
    if (values[i] === LETTER_CLASS) {
      end();
      i++;
      continue;
    }
    if (values[i] === SEPARATOR_CLASS) {
      i++;
      continue;
    }
    let j = i;
    while (j < values.length && values[j] >= 0) j++;
    const glued = values[i - 1] === LETTER_CLASS || values[j] === LETTER_CLASS;
    if (glued) end();
    else for (let k = i; k < j; k++) run.push(k);
    i = j;
  }
  end();
  return runs;
}

/**
 * The windows of `digits` that pass Luhn, as [first, last] indexes (only the
 * first found when `firstOnly`). Prefix sums of the digits, doubled on even or
 * on odd indexes, give each window's Luhn sum at once (a window's doubled
 * digits are every second one from its end), so a long run costs 7 additions
 * per digit.
 */
function cardWindows(digits: number[], firstOnly: boolean): [number, number][] {
  const doubled = (d: number) => (d * 2 > 9 ? d * 2 - 9 : d * 2);
  const sums = [new Array<number>(digits.length + 1).fill(0), new Array<number>(digits.length + 1).fill(0)];
  digits.forEach((d, i) => {
    sums[0][i + 1] = sums[0][i] + (i % 2 === 0 ? doubled(d) : d);
    sums[1][i + 1] = sums[1][i] + (i % 2 === 1 ? doubled(d) : d);
  });
  const found: [number, number][] = [];
  for (let last = CARD_DIGITS.min - 1; last < digits.length; last++) {
    // The digit at `last` is not doubled: those of the other parity are.
    const sum = sums[1 - (last % 2)];
    for (let length = CARD_DIGITS.min; length <= CARD_DIGITS.max && length <= last + 1; length++) {
      const first = last - length + 1;
      if ((sum[last + 1] - sum[first]) % 10 === 0) {
        found.push([first, last]);
        if (firstOnly) return found;
      }
    }
  }
  return found;
}

/** The [start, end) spans of `text` that hold a card number, in order, overlapping ones merged (only the first found when `firstOnly`). */
function cardNumberSpans(text: string, firstOnly = false): [number, number][] {
  const spans: [number, number][] = [];
  const units = unitsOf(text);
  for (const run of digitRuns(units)) {
    const windows = cardWindows(
      run.map((i) => units.values[i]),
      firstOnly,
    );
    for (const [first, last] of windows) spans.push([units.starts[run[first]], units.starts[run[last] + 1]]);
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

/** Most values (a UUID among them) hold fewer than 13 digits outside UUIDs: nothing to look for beyond this count. */
function mayHoldCardNumber(text: string): boolean {
  if (text.length < CARD_DIGITS.min) return false;
  const rest = text.replace(UUID, '');
  let digits = 0;
  for (let i = 0; i < rest.length && digits < CARD_DIGITS.min; i++) {
    const code = rest.charCodeAt(i);
    if (code < 128 ? code >= 48 && code <= 57 : DIGIT_LIKE.test(String.fromCodePoint(rest.codePointAt(i)!))) digits++;
  }
  return digits >= CARD_DIGITS.min;
}

/** Whether `text` holds a card number (see above). */
export function containsCardNumber(text: string): boolean {
  return mayHoldCardNumber(text) && cardNumberSpans(text, true).length > 0;
}

/**
 * `text` with every card number in it (containsCardNumber) replaced by
 * REDACTED_CARD_NUMBER, for a value that is echoed or logged: from its first
 * digit to its last, separators between them included.
 */
export function redactCardNumbers(text: string): string {
  if (!mayHoldCardNumber(text)) return text;
  const spans = cardNumberSpans(text);
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
