import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { startEmbeddedPostgres } from '../../src/database/embedded-postgres';

/**
 * The bench's database. With DATABASE_URL: a throwaway database created on that
 * server (and dropped at the end), so the bench never touches existing tables.
 * Without it: an embedded PostgreSQL (the same startEmbeddedPostgres main.ts
 * uses, default settings, fsync on) in a temporary folder removed at the end.
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

  const dir = await mkdtemp(join(tmpdir(), 'safe-retries-bench-'));
  // As root the server runs as the `postgres` user, which must reach the data folder.
  await chmod(dir, 0o755);
  const embedded = await startEmbeddedPostgres({ dataDir: join(dir, 'data') });
  log(`started embedded PostgreSQL in ${dir}`);
  return {
    url: embedded.url,
    kind: 'embedded',
    version: await serverVersion(embedded.url),
    stop: async () => {
      try {
        await embedded.stop();
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  };
}
