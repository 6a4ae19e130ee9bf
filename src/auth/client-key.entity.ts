import { Check, Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn, Unique } from 'typeorm';
import { ClientEntity } from './client.entity';

/**
 * One API key of a client (a client may hold several: rotation adds one, revocation
 * sets revoked_at). A key authenticates while its hash is here and revoked_at is NULL.
 */
@Entity({ name: 'client_keys' })
@Unique('client_keys_key_hash_key', ['keyHash'])
@Check('client_keys_key_hash_length', 'octet_length(key_hash) = 32')
@Index('client_keys_client_idx', ['clientId'])
export class ClientKeyEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'client_keys_pkey' })
  id!: string;

  @Column({ name: 'client_id', type: 'uuid' })
  clientId!: string;

  /** SHA-256 of the API key; the key itself is never stored. */
  @Column({ name: 'key_hash', type: 'bytea' })
  keyHash!: Buffer;

  /**
   * The key's first characters, for humans to tell keys apart (not secret: see
   * keyPrefix). NULL for keys stored before keys had prefixes, until API_KEYS
   * seeds the same key again.
   */
  @Column({ type: 'text', nullable: true })
  prefix!: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt!: Date | null;

  @ManyToOne(() => ClientEntity, { nullable: false, onDelete: 'CASCADE' })
  @JoinColumn({ name: 'client_id', foreignKeyConstraintName: 'client_keys_client_fkey' })
  client?: ClientEntity;
}
