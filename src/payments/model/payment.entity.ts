import { Check, Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';
import { ClientEntity } from '../../auth/client.entity';
import { OrderEntity } from '../../orders/order.entity';
import { bigintToNumber } from '../../money/money';

/**
 * processing: between its Start and Finish phases (the card network may have
 * charged); requires_attention: handed to a person (operation_attention), the
 * order still reserved.
 */
export const PAYMENT_STATUSES = ['processing', 'succeeded', 'failed', 'requires_attention'] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];

@Entity({ name: 'payments' })
@Index('payments_client_created_idx', ['clientId', 'createdAt', 'id'])
// A payment that is or may be charged reserves its order: no second charge of it starts.
@Index('payments_one_active_per_order', ['clientId', 'orderId'], {
  unique: true,
  where: `status IN ('processing', 'succeeded', 'requires_attention') AND order_id IS NOT NULL`,
})
@Check('payments_status_check', `status IN ('processing', 'succeeded', 'failed', 'requires_attention')`)
@Check('payments_amount_check', 'amount BETWEEN 1 AND 99999999')
@Check('payments_currency_check', `currency ~ '^[a-z]{3}$'`)
@Check('payments_refunded_check', 'amount_refunded BETWEEN 0 AND amount')
export class PaymentEntity {
  @PrimaryColumn({ name: 'client_id', type: 'uuid', primaryKeyConstraintName: 'payments_pkey' })
  clientId!: string;

  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'payments_pkey' })
  id!: string;

  @Column({ name: 'order_id', type: 'uuid', nullable: true })
  orderId!: string | null;

  @Column({ type: 'text' })
  status!: PaymentStatus;

  @Column({ type: 'bigint', transformer: bigintToNumber })
  amount!: number;

  @Column({ type: 'text' })
  currency!: string;

  @Column({ type: 'text', nullable: true })
  description!: string | null;

  @Column({ name: 'failure_code', type: 'text', nullable: true })
  failureCode!: string | null;

  /** The card source charged, kept so that any attempt can resume the charge. */
  @Column({ name: 'payment_method', type: 'text', nullable: true })
  paymentMethod!: string | null;

  /** The card network's id of the charge (a PaymentIntent id). */
  @Column({ name: 'network_charge_id', type: 'text', nullable: true })
  networkChargeId!: string | null;

  /** The client's Idempotency-Key of the payment (a webhook resumes its operation by it). */
  @Column({ name: 'idempotency_key', type: 'text', nullable: true })
  idempotencyKey!: string | null;

  @Column({ name: 'amount_refunded', type: 'bigint', default: 0, transformer: bigintToNumber })
  amountRefunded!: number;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @ManyToOne(() => ClientEntity, { nullable: false })
  @JoinColumn({ name: 'client_id', foreignKeyConstraintName: 'payments_client_fkey' })
  client?: ClientEntity;

  /** Composite: a payment can only reference an order of its own client. */
  @ManyToOne(() => OrderEntity)
  @JoinColumn([
    { name: 'client_id', referencedColumnName: 'clientId', foreignKeyConstraintName: 'payments_order_fkey' },
    { name: 'order_id', referencedColumnName: 'id', foreignKeyConstraintName: 'payments_order_fkey' },
  ])
  order?: OrderEntity;
}
