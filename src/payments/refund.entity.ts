import { Check, Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';
import { PaymentEntity } from './payment.entity';
import { bigintToNumber } from '../common/money';

export const REFUND_STATUSES = ['processing', 'succeeded'] as const;
export type RefundStatus = (typeof REFUND_STATUSES)[number];

@Entity({ name: 'refunds' })
@Index('refunds_payment_idx', ['clientId', 'paymentId', 'createdAt'])
@Check('refunds_amount_check', 'amount > 0')
@Check('refunds_status_check', `status IN ('processing', 'succeeded')`)
export class RefundEntity {
  @PrimaryColumn({ name: 'client_id', type: 'uuid', primaryKeyConstraintName: 'refunds_pkey' })
  clientId!: string;

  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'refunds_pkey' })
  id!: string;

  @Column({ name: 'payment_id', type: 'uuid' })
  paymentId!: string;

  @Column({ type: 'bigint', transformer: bigintToNumber })
  amount!: number;

  /** processing: reserved against the payment, not yet confirmed by the card network. */
  @Column({ type: 'text', default: 'succeeded' })
  status!: RefundStatus;

  @Column({ name: 'network_refund_id', type: 'text', nullable: true })
  networkRefundId!: string | null;

  /** The client's Idempotency-Key of the refund (a webhook resumes its operation by it). */
  @Column({ name: 'idempotency_key', type: 'text', nullable: true })
  idempotencyKey!: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @ManyToOne(() => PaymentEntity, { nullable: false })
  @JoinColumn([
    { name: 'client_id', referencedColumnName: 'clientId', foreignKeyConstraintName: 'refunds_payment_fkey' },
    { name: 'payment_id', referencedColumnName: 'id', foreignKeyConstraintName: 'refunds_payment_fkey' },
  ])
  payment?: PaymentEntity;
}
