import { INestApplication, Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IdempotencyModule, IdempotencyModuleOptions, transactionalClsModule } from 'safe-retries';
import { idempotencyMigrations } from 'safe-retries/migrations';
import { createDatabase } from './test-services';

/**
 * The module in a Nest application (not listening) on a fresh database of
 * the run's PostgreSQL, migrated by the module's own migrations, its purge and
 * recovery jobs off, with `options` and the test's `providers`. `close` ends
 * the app and drops the database.
 */
export async function moduleApp(options: IdempotencyModuleOptions, providers: Provider[] = []): Promise<{ app: INestApplication; close(): Promise<void> }> {
  const db = await createDatabase();
  const moduleRef = await Test.createTestingModule({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url: db.url, migrations: idempotencyMigrations(), migrationsRun: true }),
      transactionalClsModule({ middleware: false }),
      IdempotencyModule.forRoot({ purge: { enabled: false }, recovery: { enabled: false }, ...options }),
    ],
    providers,
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  return {
    app,
    close: async () => {
      await app.close();
      await db.drop();
    },
  };
}
