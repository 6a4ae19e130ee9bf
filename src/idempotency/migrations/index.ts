import { MigrationInterface } from 'typeorm';
import { DEFAULT_TABLE_NAME, idempotencyTable } from '../idempotency-table';
import { createIdempotencyKeys } from './1764460800001-CreateIdempotencyKeys';
import { idempotencyKeysRecovery } from './1764460800004-IdempotencyKeysRecovery';
import { idempotencyKeysAnyScope } from './1764460800005-IdempotencyKeysAnyScope';
import { idempotencyKeysHashed } from './1796081151558-IdempotencyKeysHashed';

export type IdempotencyMigration = new () => MigrationInterface;

/**
 * The module's migrations, in order, for a table named `tableName` (the same
 * as `IdempotencyModule.forRoot({ tableName })`). Add them to the data source's
 * `migrations` among the app's own; their names (and timestamps) never change,
 * so a database that has run one never runs it again. For a database managed
 * without TypeORM migrations, sql/idempotency-keys.sql is the same schema.
 */
export function createIdempotencyMigrations(tableName: string = DEFAULT_TABLE_NAME): IdempotencyMigration[] {
  const table = idempotencyTable(tableName);
  return [createIdempotencyKeys(table), idempotencyKeysRecovery(table), idempotencyKeysAnyScope(table), idempotencyKeysHashed(table)];
}

/** The module's migrations for the default table, `idempotency_keys`. */
export const idempotencyMigrations: IdempotencyMigration[] = createIdempotencyMigrations();
