import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn, Unique } from 'typeorm';

/** An API client; its keys are in client_keys (ClientKeyEntity). */
@Entity({ name: 'clients' })
@Unique('clients_name_key', ['name'])
export class ClientEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'clients_pkey' })
  id!: string;

  @Column({ type: 'text' })
  name!: string;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
