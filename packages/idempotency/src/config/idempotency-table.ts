/**
 * The table the module keeps its keys in, configurable
 * (`IdempotencyModule.forRoot({ postgres: { tableName } })`, `idempotencyMigrations`),
 * `idempotency_keys` by default. Every statement uses the escaped identifier,
 * and the names of the table's constraints and indexes derive from it, so two
 * tables in one schema never collide (for the default table they are the names
 * the first migration gave them).
 */
export const DEFAULT_TABLE_NAME = 'idempotency_keys';
export const DEFAULT_OUTBOX_TABLE_NAME = 'idempotency_outbox';

export interface IdempotencyTable {
  /** As configured: `table` or `schema.table`. */
  readonly name: string;
  /** The escaped identifier for SQL, e.g. `"idempotency_keys"` or `"app"."keys"`. */
  readonly sql: string;
  /** The escaped table name without its schema (for RENAME TO). */
  readonly unqualified: string;
  /** The escaped name of one of the table's constraints or indexes, e.g. `"idempotency_keys_pkey"`. */
  part(suffix: string): string;
  /** The same, schema-qualified (for DROP INDEX). */
  qualifiedPart(suffix: string): string;
}

const quote = (identifier: string) => `"${identifier.replace(/"/g, '""')}"`;

export function idempotencyTable(name: string = DEFAULT_TABLE_NAME): IdempotencyTable {
  const parts = name.split('.');
  if (parts.length > 2 || parts.some((p) => p.length === 0 || p.length > 63)) {
    throw new Error(`IdempotencyModule: postgres.tableName "${name}" must be "table" or "schema.table", each part 1-63 characters`);
  }
  const table = parts[parts.length - 1];
  const schema = parts.length === 2 ? parts[0] : undefined;
  return {
    name,
    sql: parts.map(quote).join('.'),
    unqualified: quote(table),
    part: (suffix) => quote(`${table}_${suffix}`),
    qualifiedPart: (suffix) => (schema === undefined ? '' : `${quote(schema)}.`) + quote(`${table}_${suffix}`),
  };
}
