import { Client } from 'pg';
import { AppConfig } from '../config/config';
import { databaseMode, describeDatabaseMode } from './database-mode';
import { EmbeddedPostgresBusyError, startEmbeddedPostgres } from './embedded-postgres';

/**
 * Picks the database before the app is built: DATABASE_URL when set, else an
 * embedded PostgreSQL. Either way the server is proven to answer first, so a
 * dead database ends the boot with one clear sentence, not a retry loop.
 */
export interface DatabaseServer {
  url: string;
  kind: 'external' | 'embedded';
  stop(): Promise<void>;
}

export class DatabaseStartError extends Error {
  override name = 'DatabaseStartError';
}

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}

export async function verifyConnection(url: string, name = 'PostgreSQL'): Promise<string> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
    const { rows } = await client.query<{ server_version: string }>('SHOW server_version');
    return rows[0].server_version;
  } catch (error) {
    throw new DatabaseStartError(`cannot connect to ${name} at ${redact(url)}: ${(error as Error).message}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * `whenRunning`: what to do when a live process (another app, or a CLI run)
 * already runs the embedded PostgreSQL on this data folder. The app refuses
 * ('refuse': one line naming its pid); the CLIs 'attach' to it and leave it running.
 */
export async function openDatabase(
  config: AppConfig,
  log: (message: string) => void,
  whenRunning: 'attach' | 'refuse' = 'refuse',
): Promise<DatabaseServer> {
  if (config.database.url) {
    const version = await verifyConnection(config.database.url);
    log(`using external PostgreSQL ${version} at ${redact(config.database.url)}`);
    if (config.database.directUrl) await verifyConnection(config.database.directUrl, 'DATABASE_DIRECT_URL');
    log(describeDatabaseMode(databaseMode(config.database)));
    return { url: config.database.url, kind: 'external', stop: async () => undefined };
  }
  let embedded;
  try {
    embedded = await startEmbeddedPostgres({
      dataDir: config.database.embeddedDir,
      port: config.database.embeddedPort,
      whenRunning,
      warn: log,
    });
  } catch (error) {
    if (error instanceof EmbeddedPostgresBusyError) throw new DatabaseStartError(error.message);
    throw new DatabaseStartError(
      `DATABASE_URL is unset and the embedded PostgreSQL in ${config.database.embeddedDir} could not start: ${(error as Error)?.message ?? error}`,
    );
  }
  const version = await verifyConnection(embedded.url);
  log(
    embedded.ownerPid
      ? `using the embedded PostgreSQL ${version} of the running process ${embedded.ownerPid} at ${redact(embedded.url)} (data in ${embedded.dataDir}); it is left running`
      : `started embedded PostgreSQL ${version} at ${redact(embedded.url)} (data in ${embedded.dataDir})`,
  );
  log(describeDatabaseMode(databaseMode(config.database)));
  return { url: embedded.url, kind: 'embedded', stop: () => embedded.stop() };
}
