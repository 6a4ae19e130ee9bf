import { EntitySchema } from 'typeorm';
import { DEFAULT_TABLE_NAME, idempotencyTable } from './idempotency-table';

/**
 * One row per (client, key), written on every protected request, so it is kept
 * small: nine columns (a ninth column costs a row with NULLs 8 bytes of tuple
 * header alignment; the recovery point needs it), no created_at (the row stores
 * its expiry instead, which is what retention and purge need), the lease
 * deadline doubling as the fencing token, and headers stored only when they
 * differ from plain JSON.
 *
 * The module's SQL lives in the store and its schema in its migrations; this
 * entity only lets an app's `migration:generate` see the table (add it to the
 * data source's `entities`). It is a schema rather than a decorated class
 * because the table name is configurable: `idempotencyKeyEntity(tableName)`.
 */
export interface IdempotencyKeyRow {
  clientId: string;
  key: string;
  /** SHA-256 of method, path, sorted query and canonical body. */
  fingerprint: Buffer;
  /** Lease deadline in microseconds since the epoch (database clock); the fencing token. */
  lease: string;
  /** When the key stops counting: creation + the route's retention. */
  expiresAt: Date;
  /** Response status; NULL while the request is in progress. */
  status: number | null;
  /** The response body exactly as sent (text, not jsonb, to keep its bytes). */
  body: string | null;
  /** Content-Type and Location when they differ from plain JSON (compact JSON). */
  headers: string | null;
  /** A phased operation's last recovery point while it is in progress (see PhasedOperation); NULL otherwise. */
  recovery: unknown;
}

export function idempotencyKeyEntity(tableName: string = DEFAULT_TABLE_NAME): EntitySchema<IdempotencyKeyRow> {
  const parts = tableName.split('.');
  const table = parts[parts.length - 1];
  idempotencyTable(tableName); // validates the name
  const pkey = `${table}_pkey`;
  return new EntitySchema<IdempotencyKeyRow>({
    name: `IdempotencyKey:${tableName}`,
    tableName: table,
    schema: parts.length === 2 ? parts[0] : undefined,
    columns: {
      clientId: { name: 'client_id', type: 'text', primary: true, primaryKeyConstraintName: pkey },
      key: { type: 'text', primary: true, primaryKeyConstraintName: pkey },
      fingerprint: { type: 'bytea' },
      lease: { type: 'bigint' },
      expiresAt: { name: 'expires_at', type: 'timestamptz' },
      status: { type: 'smallint', nullable: true },
      body: { type: 'text', nullable: true },
      headers: { type: 'text', nullable: true },
      recovery: { type: 'jsonb', nullable: true },
    },
    indices: [
      { name: `${table}_expires_at_idx`, columns: ['expiresAt'] },
      { name: `${table}_recovery_idx`, columns: ['lease'], where: 'recovery IS NOT NULL' },
    ],
    checks: [{ name: `${table}_fingerprint_length`, expression: 'octet_length(fingerprint) = 32' }],
  });
}

/** The entity of the default table, `idempotency_keys`. */
export const IdempotencyKeyEntity = idempotencyKeyEntity();
