import { ClientConfig, Pool } from 'pg';
import { DataSource } from 'typeorm';

interface Credentials {
  url?: string;
  host?: string;
  port?: number;
  username?: string;
  password?: unknown;
  database?: string;
  ssl?: unknown;
}

/** How long a claim's statement may take on a direct connection before the server counts as frozen. */
const CLAIM_READ_TIMEOUT_MS = 5_000;

/**
 * The claim pool: claims, takeovers, renewals and releases commit on it, each
 * one autocommit statement, with synchronous_commit = off (see the store's
 * header for why that is safe). It connects to the primary, always: with
 * TypeORM's replication options that is `replication.master`, never one of the
 * `slaves`. A claim or replay lookup answered by a lagging replica would see no
 * key and run the request a second time. Behind a transaction pooler it sets no
 * session parameter (PgBouncer refuses `options` at connect).
 */
export function createClaimPool(dataSource: DataSource, max: number, transactionPooler: boolean): Pool {
  const options = dataSource.options as Credentials & {
    replication?: { master: Credentials };
    extra?: { connectionTimeoutMillis?: number; query_timeout?: number };
  };
  const o: Credentials = options.replication?.master ?? options;
  return new Pool({
    connectionString: o.url,
    host: o.host,
    port: o.port,
    user: o.username,
    password: typeof o.password === 'string' ? o.password : undefined,
    database: o.database,
    ssl: o.ssl as never,
    max,
    // A claim waits its turn for a connection as long as the data source's statements do.
    connectionTimeoutMillis: options.extra?.connectionTimeoutMillis ?? 3_000,
    // Claims are single short statements: on a direct connection a frozen server is an
    // outage (503) after 5 s. Behind a transaction pooler a statement's time includes its
    // turn in the pooler's queue, which a burst makes long: there it gets the data
    // source's read timeout, as every other statement does.
    query_timeout: transactionPooler ? (options.extra?.query_timeout ?? CLAIM_READ_TIMEOUT_MS) : CLAIM_READ_TIMEOUT_MS,
    keepAlive: true,
    application_name: 'safe-retries-claims',
    ...(transactionPooler ? {} : { options: '-c synchronous_commit=off' }),
  });
}

/** Where a session of the module's own connects: the data source's primary, as the claim pool does. */
export function primaryClientConfig(dataSource: DataSource): ClientConfig {
  const options = dataSource.options as Credentials & { replication?: { master: Credentials } };
  const o: Credentials = options.replication?.master ?? options;
  const password = typeof o.password === 'string' ? o.password : undefined;
  return { connectionString: o.url, host: o.host, port: o.port, user: o.username, password, database: o.database, ssl: o.ssl as never };
}
