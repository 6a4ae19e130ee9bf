import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** One event applied: the effect that must happen once per delivered event. */
@Entity({ name: 'payment_events' })
export class PaymentEvent {
  @PrimaryGeneratedColumn('identity', { type: 'bigint' })
  id!: string;

  @Column({ name: 'event_id', type: 'text' })
  eventId!: string;

  @Column({ type: 'text' })
  type!: string;

  @Column({ name: 'payment_id', type: 'text', nullable: true })
  paymentId!: string | null;

  @CreateDateColumn({ name: 'received_at', type: 'timestamptz' })
  receivedAt!: Date;
}
