import { DataSource, DataSourceOptions } from 'typeorm';
import { CreatePaymentEvents1796500000000 } from './migrations/1796500000000-CreatePaymentEvents';
import { PaymentEvent } from './payment-event.entity';

/**
 * The app's one database configuration, used by the Nest app (TypeOrmModule) and by
 * `npm run migrate` alike. The migration classes are listed (no glob), so they load
 * under jest too; the idempotency module creates its own tables at startup.
 */
export function dataSourceOptions(url = process.env.DATABASE_URL): DataSourceOptions {
  if (!url) throw new Error('DATABASE_URL is not set (postgres://user:password@host:5432/database)');
  return {
    type: 'postgres',
    url,
    entities: [PaymentEvent],
    migrations: [CreatePaymentEvents1796500000000],
    migrationsTransactionMode: 'each',
  };
}

/** Runs the app's pending migrations on the database at `url`. */
export async function migrate(url?: string): Promise<string[]> {
  const dataSource = new DataSource(dataSourceOptions(url));
  await dataSource.initialize();
  try {
    return (await dataSource.runMigrations()).map((m) => m.name);
  } finally {
    await dataSource.destroy();
  }
}
