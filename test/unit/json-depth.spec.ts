import { jsonDepth } from '../../src/common/json-depth';

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
