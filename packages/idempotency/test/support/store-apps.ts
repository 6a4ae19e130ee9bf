import { Type } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IdempotencyModule, IdempotencyModuleOptions, transactionalClsModule } from 'safe-retries';
import { idempotencyMigrations } from 'safe-retries/migrations';
import { IDEMPOTENCY_POSTGRES_STORE, StoreContractSubject, idempotencyStoreOf } from 'safe-retries/testing';
import { createDatabase } from './test-services';

/**
 * The module alone in a Nest application context (no HTTP, no app of ours) on a
 * fresh database of the run's PostgreSQL, migrated by the module's own
 * migrations, its jobs off; `store` replaces the PostgreSQL store (a store that
 * breaks the contract); `pipeline`: node-postgres clients that pipeline (TypeORM's
 * `extra: { pipeline: true }`). Its PostgreSQL store, ready for the contract kit.
 */
export async function postgresStoreSubject(
  options: IdempotencyModuleOptions = {},
  store?: Type,
  { pipeline = false }: { pipeline?: boolean } = {},
): Promise<StoreContractSubject & { app: TestingModule }> {
  const db = await createDatabase();
  let builder = Test.createTestingModule({
    imports: [
      TypeOrmModule.forRoot({
        type: 'postgres',
        url: db.url,
        migrations: idempotencyMigrations(options.postgres?.tableName),
        migrationsRun: true,
        ...(pipeline ? { extra: { pipeline: true } } : {}),
      }),
      transactionalClsModule({ middleware: false }),
      IdempotencyModule.forRoot({ purge: { enabled: false }, recovery: { enabled: false }, replayCache: { enabled: false }, ...options }),
    ],
  });
  if (store) builder = builder.overrideProvider(IDEMPOTENCY_POSTGRES_STORE).useClass(store);
  const app = await builder.compile();
  await app.init();
  return {
    app,
    ...idempotencyStoreOf(app),
    close: async () => {
      await app.close();
      await db.drop();
    },
  };
}
