import { randomBytes } from 'node:crypto';
import { startPostgres } from '@safe-retries/dev-postgres';
import { Client } from 'pg';

/**
 * The bench's database. With DATABASE_URL: a throwaway database created on that
 * server (and dropped at the end), so the bench never touches existing tables.
 * Without it: a temporary PostgreSQL of @safe-retries/dev-postgres (the one the
 * app's development mode uses), default settings with fsync on, removed at the end.
 */
export interface BenchDatabase {
  url: string;
  kind: 'external' | 'embedded';
  version: string;
  stop(): Promise<void>;
}

async function serverVersion(url: string): Promise<string> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ v: string }>('SELECT version() AS v');
    return rows[0].v;
  } finally {
    await c.end();
  }
}

export async function openBenchDatabase(log: (m: string) => void): Promise<BenchDatabase> {
  const external = process.env.DATABASE_URL?.trim();
  if (external) {
    const name = `bench_${randomBytes(5).toString('hex')}`;
    const admin = new Client({ connectionString: external });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)}`);
    } catch (error) {
      throw new Error(`the bench needs a database of its own and could not create one on DATABASE_URL: ${(error as Error).message}`, { cause: error });
    } finally {
      await admin.end();
    }
    const url = new URL(external);
    url.pathname = `/${name}`;
    log(`created database ${name} on DATABASE_URL`);
    return {
      url: url.toString(),
      kind: 'external',
      version: await serverVersion(url.toString()),
      stop: async () => {
        const c = new Client({ connectionString: external });
        await c.connect();
        try {
          await c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`);
        } finally {
          await c.end();
        }
      },
    };
  }

  // A temporary cluster runs with fsync off; the bench measures a durable one.
  const embedded = await startPostgres({ database: 'safe_retries', settings: { fsync: 'on' } });
  log(`started embedded PostgreSQL in ${embedded.dataDir}`);
  return {
    url: embedded.url(),
    kind: 'embedded',
    version: await serverVersion(embedded.url()),
    stop: () => embedded.destroy(),
  };
}
