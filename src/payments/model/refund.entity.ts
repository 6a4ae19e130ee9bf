import { Check, Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';
import { PaymentEntity } from './payment.entity';
import { bigintToNumber } from '../../money/money';

/**
 * processing: reserved against the payment, the network's answer not yet known;
 * pending: the network has it, not settled; succeeded; failed: the network gave
 * up on it (or an operator marked it failed) and its amount is back on the
 * payment; requires_attention: handed to a person, its amount still reserved.
 */
export const REFUND_STATUSES = ['processing', 'pending', 'succeeded', 'failed', 'requires_attention'] as const;
export type RefundStatus = (typeof REFUND_STATUSES)[number];

@Entity({ name: 'refunds' })
@Index('refunds_payment_idx', ['clientId', 'paymentId', 'createdAt'])
// The settlement job's walks (RefundSettlementJob), in (created_at, client_id, id) order.
@Index('refunds_pending_walk_idx', ['createdAt', 'clientId', 'id'], { where: `status = 'pending'` })
@Index('refunds_succeeded_walk_idx', ['createdAt', 'clientId', 'id'], { where: `status = 'succeeded'` })
@Check('refunds_amount_check', 'amount > 0')
@Check('refunds_status_check', `status IN ('processing', 'pending', 'succeeded', 'failed', 'requires_attention')`)
export class RefundEntity {
  @PrimaryColumn({ name: 'client_id', type: 'uuid', primaryKeyConstraintName: 'refunds_pkey' })
  clientId!: string;

  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'refunds_pkey' })
  id!: string;

  @Column({ name: 'payment_id', type: 'uuid' })
  paymentId!: string;

  @Column({ type: 'bigint', transformer: bigintToNumber })
  amount!: number;

  @Column({ type: 'text', default: 'succeeded' })
  status!: RefundStatus;

  /** The network's reason, for a failed refund. */
  @Column({ name: 'failure_reason', type: 'text', nullable: true })
  failureReason!: string | null;

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
