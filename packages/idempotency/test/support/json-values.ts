import fc from 'fast-check';

/** JSON values and key orders for the canonical form's properties. */

/**
 * Rebuilds a JSON value with the keys of every object (at every depth) in the
 * order given by `order`. Object.fromEntries defines own data properties, so a
 * "__proto__" key stays an ordinary key, as it is after JSON.parse.
 */
export function reorderKeys(value: unknown, order: (keys: string[]) => string[]): unknown {
  if (Array.isArray(value)) return value.map((item) => reorderKeys(item, order));
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  return Object.fromEntries(order(Object.keys(record)).map((k) => [k, reorderKeys(record[k], order)]));
}

/** A deterministic pseudo-random permutation driven by a seed (Fisher-Yates over an LCG). */
export function shuffler(seed: number): (keys: string[]) => string[] {
  let state = seed >>> 0 || 1;
  const next = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state;
  };
  return (keys) => {
    const out = [...keys];
    for (let i = out.length - 1; i > 0; i--) {
      const j = next() % (i + 1);
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  };
}

export const reverse = (keys: string[]) => [...keys].reverse();

/** JSON values as a body parser would produce them (no -0: JSON.parse('-0') is -0 but it prints as 0). */
export const jsonBody = fc.jsonValue();
