import { IdempotencyTable, idempotencyTable } from './idempotency-table';

/**
 * The table of the messages IdempotentConsumer has processed, configurable
 * like the keys table (`IdempotencyModule.forRoot({ messages: { tableName } })`
 * and the second argument of `idempotencyMigrations`),
 * `idempotency_messages` by default; its constraint and index names derive
 * from it the same way.
 */
export const DEFAULT_MESSAGES_TABLE_NAME = 'idempotency_messages';

export function messagesTable(name: string = DEFAULT_MESSAGES_TABLE_NAME): IdempotencyTable {
  try {
    return idempotencyTable(name);
  } catch {
    throw new Error(`IdempotencyModule: messages.tableName "${name}" must be "table" or "schema.table", each part 1-63 characters`);
  }
}
