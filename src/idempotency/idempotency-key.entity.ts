import { Check, Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * One row per (client, key), written on every protected request, so it is kept
 * small: nine columns (a ninth column costs a row with NULLs 8 bytes of tuple
 * header alignment; the recovery point needs it), no created_at (the row stores its expiry instead, which is what retention and purge need), the
 * lease deadline doubling as the fencing token, and headers stored only when
 * they differ from plain JSON. The module's SQL lives in the store; this entity
 * exists so the schema is declared once and `migration:generate` sees it.
 */
@Entity({ name: 'idempotency_keys' })
@Index('idempotency_keys_expires_at_idx', ['expiresAt'])
@Index('idempotency_keys_recovery_idx', ['lease'], { where: 'status IS NULL AND recovery IS NOT NULL' })
@Check('idempotency_keys_fingerprint_length', 'octet_length(fingerprint) = 32')
export class IdempotencyKeyEntity {
  @PrimaryColumn({ name: 'client_id', type: 'text', primaryKeyConstraintName: 'idempotency_keys_pkey' })
  clientId!: string;

  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'idempotency_keys_pkey' })
  key!: string;

  /** SHA-256 of method, path, sorted query and canonical body. */
  @Column({ type: 'bytea' })
  fingerprint!: Buffer;

  /** Lease deadline in microseconds since the epoch (database clock); the fencing token. */
  @Column({ type: 'bigint' })
  lease!: string;

  /** When the key stops counting: creation + the route's retention. */
  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt!: Date;

  /** Response status; NULL while the request is in progress. */
  @Column({ type: 'smallint', nullable: true })
  status!: number | null;

  /** The response body exactly as sent (text, not jsonb, to keep its bytes). */
  @Column({ type: 'text', nullable: true })
  body!: string | null;

  /** Content-Type and Location when they differ from plain JSON (compact JSON). */
  @Column({ type: 'text', nullable: true })
  headers!: string | null;

  /** A phased operation's last recovery point (see PhasedOperation); NULL otherwise. */
  @Column({ type: 'jsonb', nullable: true })
  recovery!: unknown;
}
