import { Check, Column, CreateDateColumn, Entity, PrimaryGeneratedColumn, Unique } from 'typeorm';

@Entity({ name: 'clients' })
@Unique('clients_name_key', ['name'])
@Unique('clients_key_hash_key', ['keyHash'])
@Check('clients_key_hash_length', 'octet_length(key_hash) = 32')
export class ClientEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'clients_pkey' })
  id!: string;

  @Column({ type: 'text' })
  name!: string;

  /** SHA-256 of the API key; the key itself is never stored. */
  @Column({ name: 'key_hash', type: 'bytea' })
  keyHash!: Buffer;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
