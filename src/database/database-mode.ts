import type { AppConfig } from '../config/config';

/**
 * How the app reaches PostgreSQL: straight, or through a transaction pooler
 * (PgBouncer in transaction mode), whose server connections serve one
 * transaction and then another client. DATABASE_URL is taken to be such a
 * pooler when a direct URL is given beside it (DATABASE_DIRECT_URL) or named
 * statements are turned off (DATABASE_PREPARED_STATEMENTS=off): either only
 * makes sense behind one (docs/scale-out.md, "Behind PgBouncer").
 *
 * Behind a declared pooler statements are unnamed unless the operator says the
 * pooler keeps them (DATABASE_PREPARED_STATEMENTS=on, e.g. PgBouncer 1.21+ with
 * max_prepared_statements): the pooler most distributions ship (PgBouncer
 * 1.18 in Debian 12) fails named statements as soon as two clients share a
 * server connection, so the safe default is the unnamed one.
 */
export interface DatabaseMode {
  transactionPooler: boolean;
  /** Named statements in the idempotency store and SqlRepository. */
  preparedStatements: boolean;
  /** The primary without the pooler: LISTEN of waiting duplicates, and the migrations. */
  directUrl?: string;
}

export function databaseMode(database: AppConfig['database']): DatabaseMode {
  const { preparedStatements, directUrl } = database;
  const transactionPooler = directUrl !== undefined || preparedStatements === false;
  return { transactionPooler, preparedStatements: preparedStatements ?? !transactionPooler, directUrl };
}

/** The one line the boot logs about it. */
export function describeDatabaseMode(mode: DatabaseMode): string {
  const statements = mode.preparedStatements ? 'named statements' : 'unnamed statements';
  if (!mode.transactionPooler) return `database mode: direct (${statements}; waits LISTEN on DATABASE_URL)`;
  const direct = mode.directUrl
    ? 'waits LISTEN and migrations run on DATABASE_DIRECT_URL'
    : 'no DATABASE_DIRECT_URL: waits poll every 250 ms, migrations run through the pooler';
  return `database mode: transaction pooler at DATABASE_URL (${statements}; ${direct}; no session state, claims commit with the server's synchronous_commit)`;
}
