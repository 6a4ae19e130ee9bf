import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import type { DataSource } from 'typeorm';

/**
 * The run's servers, as the repository's jest global setup provides them:
 * PostgreSQL (TEST_ADMIN_DATABASE_URL, a fresh database per use) and Redis
 * (TEST_REDIS_URL, when redis-server is installed; without it the Redis suites
 * skip, except under CI, where they must run).
 */
function adminUrl(): string {
  const url = process.env.TEST_ADMIN_DATABASE_URL;
  if (!url) throw new Error('TEST_ADMIN_DATABASE_URL is not set: run the tests through the repository jest (globalSetup)');
  return url;
}

async function admin<T>(work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** A new, empty database, and how to drop it. */
export async function createDatabase(): Promise<TestDatabase> {
  const name = `lib_${randomBytes(6).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  return { url: url.toString(), name, drop: () => admin((c) => c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`)).then(() => undefined) };
}

/** Rows in a table (for "nothing was written" assertions). */
export async function countRows(dataSource: DataSource, table: string, where = 'true', params: unknown[] = []): Promise<number> {
  const rows = await dataSource.query<{ n: string }[]>(`SELECT count(*)::text AS n FROM ${table} WHERE ${where}`, params);
  return Number(rows[0].n);
}

/** Whether the run has a Redis (CI always must: its suites then fail without one). */
export function hasRedis(): boolean {
  if (process.env.TEST_REDIS_URL || process.env.CI) return true;
  process.stderr.write('Redis suites skipped: install redis-server (apt-get install -y redis-server) or set REDIS_URL\n');
  return false;
}

export function redisUrl(): string {
  const url = process.env.TEST_REDIS_URL;
  if (!url) throw new Error('the Redis suites need a Redis server: install redis-server or set REDIS_URL');
  return url;
}
