import { Pool } from 'pg';

/**
 * How the kit counts a check's effects (the rows, charges or messages one
 * unique value caused), outside the API under test: a count that comes from the
 * server's own answers cannot catch a server that answers one thing and does two.
 */
export interface EffectCounter {
  count(unique: string): Promise<number>;
  close(): Promise<void>;
}

/**
 * `GET url` (with `{{unique}}` filled in, URL-encoded), answering a JSON number,
 * an array (its length) or an object with a numeric `count`. Sent without
 * credentials: it must count every client's effects.
 */
export function httpEffects(urlTemplate: string): EffectCounter {
  return {
    async count(unique) {
      const url = urlTemplate.replace(/\{\{unique\}\}/g, encodeURIComponent(unique));
      const res = await fetch(url, { signal: AbortSignal.timeout(30_000) });
      if (!res.ok) throw new Error(`the effects URL answered ${res.status}`);
      return countOf(await res.json());
    },
    close: async () => undefined,
  };
}

/** A query whose `$1` is the unique value; the first column of its first row is the count. */
export function sqlEffects(sql: string, databaseUrl: string): EffectCounter {
  const pool = new Pool({ connectionString: databaseUrl, max: 1 });
  return {
    async count(unique) {
      const { rows } = await pool.query<Record<string, unknown>>(sql, [unique]);
      const first = rows[0] ? Object.values(rows[0])[0] : 0;
      return countOf(typeof first === 'string' ? Number(first) : first);
    },
    close: () => pool.end(),
  };
}

function countOf(value: unknown): number {
  if (Array.isArray(value)) return value.length;
  const n = typeof value === 'object' && value !== null ? (value as { count?: unknown }).count : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) throw new Error(`the effects counter gave ${JSON.stringify(value)}, not a count`);
  return n;
}
