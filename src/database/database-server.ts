import { Client } from 'pg';
import { AppConfig } from '../config/config';
import { EMBEDDED_DATABASE_REFUSAL, unsafeProductionConfig } from '../config/production';
import { databaseMode, describeDatabaseMode } from './database-mode';

/**
 * Picks the database before the app is built: DATABASE_URL when set, else (in
 * development and test only) an embedded PostgreSQL from the dev-only
 * workspace package @safe-retries/dev-postgres, loaded by a dynamic import
 * here and nowhere else: the production image does not hold it. Either way
 * the server is proven to answer first, so a dead database ends the boot with
 * one clear sentence, not a retry loop.
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
  if (config.production) throw unsafeProductionConfig(config, EMBEDDED_DATABASE_REFUSAL);
  const embedded = await startEmbedded(config, whenRunning, log);
  const url = embedded.url();
  const version = await verifyConnection(url);
  log(
    embedded.ownerPid
      ? `using the embedded PostgreSQL ${version} of the running process ${embedded.ownerPid} at ${redact(url)} (data in ${embedded.dataDir}); it is left running`
      : `started embedded PostgreSQL ${version} at ${redact(url)} (data in ${embedded.dataDir})`,
  );
  log(describeDatabaseMode(databaseMode(config.database)));
  return { url, kind: 'embedded', stop: () => embedded.stop() };
}

/** The embedded PostgreSQL of .data/postgres under the working directory (database safe_retries), its data kept across restarts. */
async function startEmbedded(config: AppConfig, whenRunning: 'attach' | 'refuse', log: (message: string) => void) {
  let devPostgres: typeof import('@safe-retries/dev-postgres');
  try {
    devPostgres = await import('@safe-retries/dev-postgres');
  } catch (error) {
    throw new DatabaseStartError(
      `DATABASE_URL is unset and the embedded PostgreSQL's package (@safe-retries/dev-postgres, a development dependency) cannot be loaded: ${(error as Error).message}; install the development dependencies (npm ci) or set DATABASE_URL`,
    );
  }
  const { startPostgres, PostgresBusyError } = devPostgres;
  try {
    return await startPostgres({ dataDir: config.database.embeddedDir, database: 'safe_retries', whenRunning, warn: log });
  } catch (error) {
    if (error instanceof PostgresBusyError) throw new DatabaseStartError(`${error.message}; stop it, or start this one from another folder`);
    throw new DatabaseStartError(
      `DATABASE_URL is unset and the embedded PostgreSQL in ${config.database.embeddedDir} could not start: ${(error as Error)?.message ?? error}`,
    );
  }
}
