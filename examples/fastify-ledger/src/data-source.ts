import { DataSource, DataSourceOptions } from 'typeorm';
import { LedgerEntry } from './ledger-entry.entity';
import { CreateLedgerEntries1766000000000 } from './migrations/1766000000000-CreateLedgerEntries';

/**
 * The app's one database configuration, used by the Nest app (TypeOrmModule) and by
 * `npm run migrate` alike. The app's migration classes are listed (no glob), so they
 * load under jest too; the idempotency module creates its own tables at startup.
 */
export function ledgerDataSourceOptions(url = process.env.DATABASE_URL): DataSourceOptions {
  if (!url) throw new Error('DATABASE_URL is not set (postgres://user:password@host:5432/database)');
  return {
    type: 'postgres',
    url,
    entities: [LedgerEntry],
    migrations: [CreateLedgerEntries1766000000000],
    migrationsTransactionMode: 'each',
  };
}

/** Runs the app's pending migrations on the database at `url`. */
export async function migrate(url?: string): Promise<string[]> {
  const dataSource = new DataSource(ledgerDataSourceOptions(url));
  await dataSource.initialize();
  try {
    return (await dataSource.runMigrations()).map((m) => m.name);
  } finally {
    await dataSource.destroy();
  }
}
