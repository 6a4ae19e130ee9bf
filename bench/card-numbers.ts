/**
 * How often the card-number refusal (containsCardNumber, src/card-numbers/card-number.ts)
 * refuses an honest value, and how often it catches a card number: 20,000
 * generated values per class of honest value (fixed seed: every run prints
 * the same figures), and the test card numbers of every brand written in each
 * digit set and separator the tests use, in the contexts they use. Per class:
 * the values refused, those the wide Maestro range (50, 56-69, which
 * card-brands.ts does not use) would refuse too, and those redactCardNumbers
 * would hide in a log line (any Luhn window). Exits 1 when an honest class is refused more than 0.1% of the time
 * or a card number is missed. `npm run bench:card-numbers`.
 */
import { CARD_BRANDS, CardBrand } from '../src/card-numbers/card-brands';
import { containsCardNumber, containsCardNumberOf, hasLuhnWindow } from '../src/card-numbers/card-number';

const SAMPLES = 20_000;
const HONEST_TARGET = 0.001;
/** The table with Maestro's wide range: what it would add. */
const WIDE_MAESTRO: CardBrand[] = [...CARD_BRANDS.filter((brand) => brand.name !== 'Maestro'), { name: 'Maestro', prefixes: ['50', '56-69'], lengths: [12, 13, 14, 15, 16, 17, 18, 19] }];

/** mulberry32: a small seeded generator, so that the corpus is the same on every run. */
function generator(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = generator(55);
const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
const pick = <T>(items: readonly T[]): T => items[int(0, items.length - 1)];
const digits = (n: number) => Array.from({ length: n }, () => int(0, 9)).join('');
const pad = (value: number, width: number) => String(value).padStart(width, '0');
/** `number` cut into groups of the sizes given, joined by `sep`. */
const grouped = (number: string, sizes: number[], sep = ' ') => {
  const groups: string[] = [];
  for (let at = 0, k = 0; at < number.length; k++) groups.push(number.slice(at, (at += sizes[Math.min(k, sizes.length - 1)])));
  return groups.join(sep);
};
/** The GS1 check digit that completes `body` (GTIN-8 to GTIN-14, SSCC, USPS IMpb). */
function gs1Check(body: string): string {
  let sum = 0;
  for (let i = 0; i < body.length; i++) sum += Number(body[body.length - 1 - i]) * (i % 2 === 0 ? 3 : 1);
  return String((10 - (sum % 10)) % 10);
}
function luhnCheck(body: string): string {
  for (let d = 0; d <= 9; d++) {
    let sum = 0;
    const number = body + d;
    for (let i = 0; i < number.length; i++) {
      const v = Number(number[number.length - 1 - i]) * (i % 2 === 1 ? 2 : 1);
      sum += v > 9 ? v - 9 : v;
    }
    if (sum % 10 === 0) return String(d);
  }
  throw new Error('unreachable');
}
const gtin = (length: number) => {
  const body = digits(length - 1);
  return body + gs1Check(body);
};
/** Milliseconds between 2020-01-01 and 2030-12-31. */
const millis = () => 1_577_836_800_000 + Math.floor(random() * 347_068_800_000);
const date = (sep: string, dayFirst = false) => {
  const d = new Date(millis());
  const parts = [String(d.getUTCFullYear()), pad(d.getUTCMonth() + 1, 2), pad(d.getUTCDate(), 2)];
  return (dayFirst ? parts.reverse() : parts).join(sep);
};

/** Telephone numbers by country: code, digits of the national number, how it is grouped. */
const PHONES: [string, number[]][] = [
  ['1', [3, 3, 4]], ['44', [4, 6]], ['49', [3, 8]], ['49', [3, 4, 4]], ['49', [4, 7]], ['33', [1, 2, 2, 2, 2]], ['86', [3, 4, 4]],
  ['91', [5, 5]], ['62', [3, 4, 4]], ['62', [3, 4, 5]], ['55', [2, 5, 4]], ['81', [2, 4, 4]], ['7', [3, 3, 2, 2]], ['61', [3, 3, 3]],
  ['39', [3, 3, 4]], ['34', [3, 3, 3]], ['52', [2, 4, 4]], ['234', [3, 3, 4]], ['63', [3, 3, 4]], ['65', [4, 4]], ['66', [2, 3, 4]],
  ['60', [2, 3, 4]], ['90', [3, 3, 2, 2]], ['48', [3, 3, 3]], ['31', [1, 8]], ['43', [3, 8]], ['36', [2, 3, 4]], ['380', [2, 3, 4]],
];
const SEPARATORS_OF_KEYS = ['-', '_', ':', '.', '/'];

const HONEST: [string, () => string][] = [
  ['EAN-13 SKUs', () => pick([(n: string) => n, (n: string) => `sku-${n}`, (n: string) => `${n[0]} ${n.slice(1, 7)} ${n.slice(7)}`])(gtin(13))],
  ['GTIN-14', () => pick([(n: string) => n, (n: string) => `(01)${n}`, (n: string) => `GTIN ${n}`])(gtin(14))],
  ['UPC-A', () => pick([(n: string) => n, (n: string) => `${n[0]} ${n.slice(1, 6)} ${n.slice(6, 11)} ${n[11]}`])(gtin(12))],
  ['millisecond timestamps', () => pick([(t: number) => `${t}`, (t: number) => `at ${t} ms`, (t: number) => `{"ts":${t}}`])(millis())],
  ['µs and ns timestamps', () => `${millis()}${digits(pick([3, 6]))}`],
  [
    'order numbers, 16–22 digits',
    () =>
      pick([
        () => `${int(100, 299)}-${digits(7)}-${digits(7)}`, // marketplace style, 3-7-7
        () => `${date('')}${digits(int(8, 14))}`, // date, then a sequence
        () => `${date('')}-${digits(int(8, 12))}`,
        () => String((BigInt(millis() - 1_420_070_400_000) << 22n) | BigInt(int(0, 4_194_303))), // snowflake id
        () => `Order ${String((BigInt(millis() - 1_288_834_974_657) << 22n) | BigInt(int(0, 4_194_303)))}`,
      ])(),
  ],
  [
    'tracking numbers, 20–22 digits',
    () => {
      const body = pick([
        () => `${pick(['9400', '9205', '9361', '9270', '9300', '9407', '9303'])}${digits(17)}`, // USPS IMpb, 22
        () => `${pick(['7019', '7020', '7021', '7022', '0300', '2300'])}${digits(15)}`, // USPS, 20
        () => `00${digits(17)}`, // SSCC (GS1 AI 00), 20
        () => `96${digits(19)}`, // FedEx Ground, 22
      ])();
      const number = body + gs1Check(body);
      return pick([number, grouped(number, [4]), `tracking ${grouped(number, [4])}`]);
    },
  ],
  [
    'international phone numbers',
    () => {
      const [code, sizes] = pick(PHONES);
      const national = `${int(1, 9)}${digits(sizes.reduce((a, b) => a + b, 0) - 1)}`;
      return pick([`+${code} ${grouped(national, sizes)}`, `+${code} ${grouped(national, sizes, '-')}`, `+${code}${national}`, `(+${code}) ${grouped(national, sizes)}`, `00${code} ${grouped(national, sizes)}`, `call +${code} ${grouped(national, sizes)}`]);
    },
  ],
  [
    'invoice strings',
    () => {
      const n = String(int(1, 9_999_999));
      return pick([
        `Invoice ${date('-')} #${n}`,
        `INV-${date('-').slice(0, 4)}-${n.padStart(6, '0')}`,
        `Invoice no. ${date('').slice(0, 4)}/${n.padStart(6, '0')} of ${date('.', true)}`,
        `Rechnung Nr. ${n} vom ${date('.', true)}`,
        `Invoice #${n} (${date('-')}), total ${int(1, 99_999)}.${pad(int(0, 99), 2)}`,
        `${date('')}-${n.padStart(6, '0')}`,
      ]);
    },
  ],
  [
    'keys with timestamps',
    () => {
      const sep = pick(SEPARATORS_OF_KEYS);
      return pick([
        `order${sep}${millis()}${sep}${int(1, 99)}`,
        `${pick(['pay', 'refund', 'retry', 'checkout'])}${sep}${millis()}`,
        `${millis()}${sep}${int(1, 9_999)}`,
        `user${sep}${int(1, 9_999_999)}${sep}${millis()}`,
        `${int(1, 9_999_999)}${sep}${millis()}`,
        `${pick(['cart', 'sub'])}${sep}${Math.floor(millis() / 1000)}${sep}${int(1, 999)}`,
        `${millis()}${digits(3)}`,
      ]);
    },
  ],
];

/** Not honest classes: what no rule can tell from a card number (a random number of a card's length) and the 22-digit number the old rule refused. */
const REFERENCE: [string, () => string][] = [
  ['random 16-digit numbers (any digits)', () => `${int(1, 9)}${digits(15)}`],
  ['random 22-digit numbers (any digits)', () => `${int(1, 9)}${digits(21)}`],
];

/** Test card numbers (the card networks' and gateways' published ones, a few completed with their Luhn digit), by brand. */
const TEST_CARDS: Record<string, string[]> = {
  Visa: ['4242424242424242', '4000056655665556', '4012888888881881', '4111111111111111', '4000002500003155', '4222222222222', '4917610000000000003'],
  Mastercard: ['5555555555554444', '5200828282828210', '5105105105105100', '2223003122003222', '2223000048400011'],
  'American Express': ['378282246310005', '371449635398431', '378734493671000'],
  Discover: ['6011111111111117', '6011000990139424', '6011981111111113', '6445644564456445', '6011000000000000001'],
  JCB: ['3566002020360505', '3530111333300000', '3528000000000000007'],
  'Diners Club': ['3056930009020004', '36227206271667', '30569309025904', '38520000023237'],
  UnionPay: ['6200000000000005', '6205500000000000004', '6250941006528599', '622126000000000000'],
  Maestro: ['6759649826438453', '6304000000000000', '5020000000000005', '5038000000000005', '5893000000000009', '6761000000000006', '6767700000000005', '501800000009', '5018000000007'],
  Mir: ['2200000000000004', '2201382000000013'],
};
/** The digit sets of test/unit/card-number.spec.ts, by their zero. */
const DIGIT_SETS = [0x30, 0x660, 0x6f0, 0x966, 0x9e6, 0xe50, 0x1040, 0x17e0, 0xff10, 0x104a0, 0x1d7ce, 0x1d7f6];
const SEPARATORS = ['', ' ', '-', '_', '.', '/', ' - ', ':', '|', '\u00a0', '\u2013', '\u2014', '\u2212', '\u2009', '\u3000', '\u202f', '\u200b'];
const CONTEXTS = ['%', 'card %', 'tok_%', 'pm_%', '"%"', 'Order 1001: %', 'card % exp 12/30 cvc 123', 'ref 12: %'];
/** How a card of this length is printed. */
const PRINTED: Record<number, number[]> = { 12: [4], 13: [4, 3, 3, 3], 14: [4, 6, 4], 15: [4, 6, 5], 16: [4], 17: [4, 4, 4, 5], 18: [4], 19: [4] };

function writtenIn(number: string, zeros: number[]): string {
  return [...number].map((d, i) => (/[0-9]/.test(d) ? String.fromCodePoint(zeros[i % zeros.length] + Number(d)) : d)).join('');
}

function rate(refused: number, total: number): string {
  return `${((refused / total) * 100).toFixed(refused === 0 || refused === total ? 0 : 3)}%`;
}

let failed = false;
console.log(`Honest values, ${SAMPLES.toLocaleString('en')} each (seed 55): refused at most ${HONEST_TARGET * 100}%`);
console.log('| class | example | refused | refused with Maestro 50, 56–69 | hidden in logs (any Luhn window) | target met |');
console.log('|---|---|---|---|---|---|');
for (const [name, make, target] of [...HONEST.map(([n, m]) => [n, m, true] as const), ...REFERENCE.map(([n, m]) => [n, m, false] as const)]) {
  const example = make();
  let refused = 0;
  let wide = 0;
  let windows = 0;
  for (let i = 0; i < SAMPLES; i++) {
    const value = make();
    if (containsCardNumber(value)) refused++;
    if (containsCardNumberOf(value, WIDE_MAESTRO)) wide++;
    if (hasLuhnWindow(value)) windows++;
  }
  const met = refused / SAMPLES <= HONEST_TARGET;
  if (target && !met) failed = true;
  console.log(`| ${name} | \`${example}\` | ${rate(refused, SAMPLES)} | ${rate(wide, SAMPLES)} | ${rate(windows, SAMPLES)} | ${target ? (met ? 'yes' : '**no**') : '(reference)'} |`);
}

console.log('');
console.log(`Test card numbers: each in ${DIGIT_SETS.length} digit sets and all of them mixed, ${SEPARATORS.length} separators (none among them), ${CONTEXTS.length} contexts`);
console.log('| brand | numbers | values | caught |');
console.log('|---|---|---|---|');
let caughtAll = 0;
let totalAll = 0;
for (const [brand, numbers] of Object.entries(TEST_CARDS)) {
  let caught = 0;
  let total = 0;
  for (const number of numbers) {
    if (luhnCheck(number.slice(0, -1)) !== number.slice(-1)) throw new Error(`${number} fails Luhn: not a test card number`);
    for (const zeros of [...DIGIT_SETS.map((zero) => [zero]), DIGIT_SETS])
      for (const sep of SEPARATORS)
        for (const context of CONTEXTS) {
          const value = context.replace('%', writtenIn(grouped(number, PRINTED[number.length], sep), zeros));
          total++;
          if (containsCardNumber(value)) caught++;
          else if (total - caught <= 3) console.error(`missed: ${JSON.stringify(value)}`);
        }
  }
  if (caught !== total) failed = true;
  caughtAll += caught;
  totalAll += total;
  console.log(`| ${brand} | ${numbers.length} | ${total.toLocaleString('en')} | ${rate(caught, total)} |`);
}
console.log(`| all | ${Object.values(TEST_CARDS).flat().length} | ${totalAll.toLocaleString('en')} | ${rate(caughtAll, totalAll)} |`);
process.exitCode = failed ? 1 : 0;
