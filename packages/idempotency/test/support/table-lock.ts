import { Client } from 'pg';

/**
 * Holds a table's writers at the door: a transaction of the test's own takes
 * `LOCK TABLE ... IN SHARE MODE`, so an INSERT into it waits (reads go on)
 * until release(). A suite keeps a handler "still running" for exactly as
 * long as it needs, instead of a sleep that a slow machine outlasts.
 */
export interface TableLock {
  release(): Promise<void>;
}

export async function lockTableWrites(databaseUrl: string, table: string): Promise<TableLock> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query(`LOCK TABLE ${client.escapeIdentifier(table)} IN SHARE MODE`);
  } catch (error) {
    await client.end();
    throw error;
  }
  let released: Promise<void> | undefined;
  return {
    release: () =>
      (released ??= (async () => {
        try {
          await client.query('ROLLBACK');
        } finally {
          await client.end();
        }
      })()),
  };
}
