import { createHash } from 'node:crypto';
import { keyFor, newIdempotencyKey } from '../src';

describe('keyFor', () => {
  it('is the hex SHA-256 of the JSON array of action and ids', async () => {
    const expected = createHash('sha256').update(JSON.stringify(['refund', 'pay_123', '2'])).digest('hex');
    await expect(keyFor('refund', 'pay_123', 2)).resolves.toBe(expected);
  });

  it('is deterministic', async () => {
    const [a, b] = await Promise.all([keyFor('create-payment', 'ord_1'), keyFor('create-payment', 'ord_1')]);
    expect(a).toBe(b);
    expect(a).toMatch(/^[0-9a-f]{64}$/);
  });

  it('differs for different ids and different actions', async () => {
    const keys = await Promise.all([
      keyFor('create-payment', 'ord_1'),
      keyFor('create-payment', 'ord_2'),
      keyFor('cancel-order', 'ord_1'),
      keyFor('create-payment'),
      keyFor('create-payment', 'ord_1', 'ord_2'),
    ]);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('keeps the parts apart (no ambiguous concatenation)', async () => {
    const keys = await Promise.all([keyFor('a', 'b,c'), keyFor('a', 'b', 'c'), keyFor('a,b', 'c'), keyFor('a', 'bc'), keyFor('a', '["b"]')]);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('treats a numeric id and its string form alike', async () => {
    expect(await keyFor('refund', 42)).toBe(await keyFor('refund', '42'));
  });

  it('refuses an empty action and ids that cannot identify anything', async () => {
    await expect(keyFor('')).rejects.toThrow(TypeError);
    await expect(keyFor('refund', Number.NaN)).rejects.toThrow(TypeError);
    await expect(keyFor('refund', Number.POSITIVE_INFINITY)).rejects.toThrow(TypeError);
  });
});

describe('newIdempotencyKey', () => {
  it('is a fresh UUID each time', () => {
    const keys = Array.from({ length: 100 }, () => newIdempotencyKey());
    expect(new Set(keys).size).toBe(100);
    for (const key of keys) expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
