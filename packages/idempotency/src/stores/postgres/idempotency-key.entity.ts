import { EntitySchema } from 'typeorm';
import { DEFAULT_TABLE_NAME, idempotencyTable } from '../../config/idempotency-table';

/**
 * One row per (scope, key), written on every protected request, so it is kept
 * small (about 160 bytes with a short JSON body, see docs/benchmarks.md):
 * - neither the scope nor the key is stored, only their 16-byte hash as the
 *   primary key (`id`, see keyId), and a 16-byte fingerprint;
 * - eight columns, so the null bitmap fits the 24-byte tuple header (a ninth
 *   costs every row with a NULL 8 bytes of alignment), fixed-width ones first;
 * - no created_at (the row stores its expiry instead, which is what retention
 *   and purge need), the lease deadline doubling as the fencing token, and
 *   headers stored only when they differ from plain JSON.
 *
 * The module's SQL lives in the store and its schema in its migrations; this
 * entity only lets an app's `migration:generate` see the table (add it to the
 * data source's `entities`). It is a schema rather than a decorated class
 * because the table name is configurable: `idempotencyKeyEntity(tableName)`.
 */
export interface IdempotencyKeyRow {
  /** keyId(scope, key): the first 128 bits of SHA-256(scope, NUL, key), as a uuid. */
  id: string;
  /** Lease deadline in microseconds since the epoch (database clock); the fencing token. */
  lease: string;
  /** When the key stops counting: creation + the route's retention. */
  expiresAt: Date;
  /** Response status; NULL while the request is in progress. */
  status: number | null;
  /** The first 16 bytes of SHA-256 of method, path, sorted query and canonical body. */
  fingerprint: Buffer;
  /** The response body exactly as sent (text, not jsonb, to keep its bytes). */
  body: string | null;
  /** Content-Type and Location when they differ from plain JSON (compact JSON). */
  headers: string | null;
  /**
   * A phased operation's last recovery point while it is in progress (see
   * PhasedOperation), with the scope and key it belongs to; NULL otherwise.
   */
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
      id: { type: 'uuid', primary: true, primaryKeyConstraintName: pkey },
      lease: { type: 'bigint' },
      expiresAt: { name: 'expires_at', type: 'timestamptz' },
      status: { type: 'smallint', nullable: true },
      fingerprint: { type: 'bytea' },
      body: { type: 'text', nullable: true },
      headers: { type: 'text', nullable: true },
      recovery: { type: 'jsonb', nullable: true },
    },
    indices: [
      { name: `${table}_expires_at_idx`, columns: ['expiresAt'] },
      { name: `${table}_recovery_idx`, columns: ['lease'], where: 'recovery IS NOT NULL' },
    ],
    checks: [{ name: `${table}_fingerprint_length`, expression: 'octet_length(fingerprint) = 16' }],
  });
}
