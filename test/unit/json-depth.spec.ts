import { jsonDepth, parseJsonBody } from '../../src/http/json-depth';
import { ProblemException } from '../../src/http/problem';

describe('jsonDepth', () => {
  const depth = (text: string) => jsonDepth(Buffer.from(text, 'utf8'));

  it.each([
    ['1', 0],
    ['{}', 1],
    ['[[]]', 2],
    ['{"a":[{"b":[]}]}', 4],
    ['[[],[],[[]]]', 3],
    ['"[[[["', 0],
    ['["\\"[[[", []]', 2],
    ['{"k\\\\":[1]}', 2],
    ['{"é":["☕"]}', 2],
  ])('%s nests %i deep', (text, expected) => {
    expect(depth(text)).toBe(expected);
  });

  it('agrees with JSON.parse on random nestings', () => {
    for (let n = 0; n < 50; n++) {
      const levels = Math.floor(Math.random() * 40);
      const text = '{"x":'.repeat(levels) + '"]}[{"' + '}'.repeat(levels);
      JSON.parse(text);
      expect(depth(text)).toBe(levels);
    }
  });

  it('stops counting past its limit', () => {
    expect(jsonDepth(Buffer.from('['.repeat(1_000)), 32)).toBe(33);
  });
});

describe('parseJsonBody', () => {
  const parse = (text: string) => parseJsonBody(Buffer.from(text, 'utf8'));
  /** The problem a body is refused with: its status, code and detail. */
  const refusal = (text: string) => {
    try {
      parse(text);
    } catch (error) {
      expect(error).toBeInstanceOf(ProblemException);
      const { status, code, detail } = (error as ProblemException).problem;
      return { status, code, detail };
    }
    throw new Error(`${text} was accepted`);
  };
  const forbidden = { status: 400, code: 'invalid_json', detail: 'The request body has a __proto__ or constructor.prototype key.' };

  it('parses an object or an array, and an empty body as {}', () => {
    expect(parse(' {"a":[1,{"b":"c"}]}\n')).toEqual({ a: [1, { b: 'c' }] });
    expect(parse('[1,2]')).toEqual([1, 2]);
    expect(parse(' \r\n')).toEqual({});
  });

  it.each(['1', '"text"', 'null', '{"a":', '{"a":1,}', '\ufeff{}'])('refuses %j as not valid JSON', (text) => {
    expect(refusal(text)).toEqual({ status: 400, code: 'invalid_json', detail: 'The request body is not valid JSON.' });
  });

  it('refuses a body deeper than the limit before parsing it', () => {
    expect(refusal('['.repeat(40) + ']'.repeat(40))).toMatchObject({ code: 'invalid_json', detail: 'The request body nests deeper than 32 levels.' });
  });

  it.each([
    ['a top-level __proto__', '{"__proto__":{"isAdmin":true}}'],
    ['a nested __proto__', '{"currency":"usd","items":[{"sku":"a","__proto__":{"x":1}}]}'],
    ['an escaped __proto__', '{"\\u005f_proto__":{"x":1}}'],
    ['__proto__ in an array', '[{"__proto__":null}]'],
    ['constructor.prototype', '{"constructor":{"prototype":{"isAdmin":true}}}'],
    ['a nested constructor.prototype', '{"a":{"b":{"constructor":{"prototype":{}}}}}'],
  ])('refuses %s', (_name, text) => {
    expect(refusal(text)).toEqual(forbidden);
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
  });

  it('accepts the same words as values, and a constructor key without a prototype', () => {
    expect(parse('{"description":"__proto__","constructor":"c","note":{"constructor":{"name":"x"}}}')).toEqual({
      description: '__proto__',
      constructor: 'c',
      note: { constructor: { name: 'x' } },
    });
  });
});
