/**
 * How a text is read for card numbers (src/card-numbers/card-number.ts): its digits,
 * and the runs of digit groups a person writes a number as.
 *
 * - A digit is any Unicode decimal digit (`\p{Nd}`: ASCII, Arabic-Indic,
 *   Devanagari, fullwidth, ... mixed freely) or a character whose compatibility
 *   form is one (`²`, `①`).
 * - A group is digits with nothing between them. A run is groups joined by
 *   separators: anything that is neither a letter nor a digit (spaces, dashes,
 *   dots, underscores, slashes, their Unicode variants, invisible characters).
 *   A letter ends a run, and a group glued to a letter is part of a word or an
 *   id (`tok_1N3T00LkdIwHu7ix`, hex), not a number written by a person: it ends
 *   a run too.
 * - A UUID (8-4-4-4-12 hex digits) is read as letters: it is the recommended
 *   Idempotency-Key and request id, and 1 random UUID in about 7,500 would
 *   otherwise hold digits between its dashes that pass Luhn.
 *
 * Each joint (the separators between two groups) is kept, written in one
 * spelling per kind (every space ` `, every dash `-`, invisible characters
 * dropped, so groups split only by those are one group): a number is written
 * with one and the same joint between its groups.
 */
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
const DECIMAL_DIGIT = /^\p{Nd}$/u;
const LETTER = /^\p{L}$/u;
const INVISIBLE = /^\p{Cf}$/u;
const SPACE = /^\s$/u;
const DASH = /^[\p{Pd}\u2212]$/u;
/** What may be a digit (countDigitLike). */
const DIGIT_LIKE = /^[\p{Nd}\p{No}]$/u;

export const LETTER_CLASS = -1;
export const SEPARATOR_CLASS = -2;

/** The code points of a text: each one's digit value (0-9), LETTER_CLASS or SEPARATOR_CLASS, and where it starts. */
export interface Units {
  text: string;
  values: number[];
  /** starts[i] is where code point i starts in the text; starts[length] is the text's length. */
  starts: number[];
}

/** A run of digit groups (see above). */
export interface DigitRun {
  /** The indexes of the run's digits' code points, in order. */
  digits: number[];
  /** Each group as its [first, end) range of `digits`. */
  groups: [number, number][];
  /** joints[i] joins groups[i] and groups[i + 1], in its one spelling. */
  joints: string[];
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

export function unitsOf(text: string): Units {
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
  return { text, values, starts };
}

/** A joint in its one spelling: each space ` `, each dash `-`, invisible characters dropped, spaces in a row one. */
function spelling(separators: string): string {
  let out = '';
  for (const char of separators) {
    if (INVISIBLE.test(char)) continue;
    const one = SPACE.test(char) ? ' ' : DASH.test(char) ? '-' : char.normalize('NFKC');
    if (!(one === ' ' && out.endsWith(' '))) out += one;
  }
  return out;
}

/** The runs of `units` holding at least `minDigits` digits. */
export function digitRuns(units: Units, minDigits: number): DigitRun[] {
  const { values, starts, text } = units;
  const runs: DigitRun[] = [];
  let run: DigitRun = { digits: [], groups: [], joints: [] };
  const end = () => {
    if (run.digits.length >= minDigits) runs.push(run);
    run = { digits: [], groups: [], joints: [] };
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
    if (values[i - 1] === LETTER_CLASS || values[j] === LETTER_CLASS) end();
    else {
      const previous = run.groups.at(-1);
      const joint = previous ? spelling(text.slice(starts[run.digits[run.digits.length - 1] + 1], starts[i])) : undefined;
      for (let k = i; k < j; k++) run.digits.push(k);
      if (previous && joint === '') previous[1] = run.digits.length;
      else {
        if (joint !== undefined) run.joints.push(joint);
        run.groups.push([run.digits.length - (j - i), run.digits.length]);
      }
    }
    i = j;
  }
  end();
  return runs;
}

/** How many characters of `text` outside UUIDs may be digits, counted up to `enough`: most values hold too few to look further. */
export function countDigitLike(text: string, enough: number): number {
  if (text.length < enough) return 0;
  const rest = text.replace(UUID, '');
  let digits = 0;
  for (let i = 0; i < rest.length && digits < enough; i++) {
    const code = rest.charCodeAt(i);
    if (code < 128 ? code >= 48 && code <= 57 : DIGIT_LIKE.test(String.fromCodePoint(rest.codePointAt(i)!))) digits++;
  }
  return digits;
}
