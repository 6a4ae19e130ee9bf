import { Client } from 'pg';
import { HeldKey, holdKey } from '../../packages/idempotency/test/support/claim-window';
import { keyIdSql } from '../../packages/idempotency/test/support/keys-table';

/*
 * The keys table stores neither scope nor key, only their hash (keyId): these
 * stand for the `key = $1` a test would write, matching the key under any of
 * the app's clients (a test's keys are random, so no two clients share one).
 */

/** SQL condition on idempotency_keys: the row of Idempotency-Key `param`, whichever client holds it. */
export const keyIs = (param = '$1') => `id IN (SELECT ${keyIdSql('c.id::text', `${param}::text`)} FROM clients c)`;

/** The same for an array of keys. */
export const keyIn = (param = '$1') => `id IN (SELECT ${keyIdSql('c.id::text', 'k')} FROM clients c, unnest(${param}::text[]) k)`;

/** holdKey (claim-window.ts) for a key of the app's: its row under every client, whichever one sends it. */
export async function holdClientKey(databaseUrl: string, key: string): Promise<HeldKey> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string }>('SELECT id::text AS id FROM clients');
    return await holdKey(databaseUrl, key, rows.map((r) => r.id));
  } finally {
    await client.end();
  }
}
