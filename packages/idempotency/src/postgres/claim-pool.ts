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
    extra?: { connectionTimeoutMillis?: number };
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
    connectionTimeoutMillis: options.extra?.connectionTimeoutMillis ?? 3_000,
    // Claims are single short statements: a frozen server is an outage (503).
    query_timeout: 5_000,
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
