import { Check, Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';
import { ClientEntity } from '../auth/client.entity';
import { bigintToNumber } from '../money/money';

export type OrderStatus = 'pending' | 'paid' | 'canceled';

export interface OrderItem {
  sku: string;
  quantity: number;
  unit_amount: number;
}

/** Every table carries client_id and every key includes it (sharding by client). */
@Entity({ name: 'orders' })
@Index('orders_client_created_idx', ['clientId', 'createdAt', 'id'])
@Check('orders_status_check', `status IN ('pending', 'paid', 'canceled')`)
@Check('orders_currency_check', `currency ~ '^[a-z]{3}$'`)
@Check('orders_amount_total_check', 'amount_total >= 0')
export class OrderEntity {
  @PrimaryColumn({ name: 'client_id', type: 'uuid', primaryKeyConstraintName: 'orders_pkey' })
  clientId!: string;

  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'orders_pkey' })
  id!: string;

  @Column({ type: 'text' })
  status!: OrderStatus;

  @Column({ type: 'text' })
  currency!: string;

  @Column({ name: 'amount_total', type: 'bigint', transformer: bigintToNumber })
  amountTotal!: number;

  /** The line items as ordered: an immutable snapshot. */
  @Column({ type: 'jsonb' })
  items!: OrderItem[];

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @ManyToOne(() => ClientEntity, { nullable: false })
  @JoinColumn({ name: 'client_id', foreignKeyConstraintName: 'orders_client_fkey' })
  client?: ClientEntity;
}
