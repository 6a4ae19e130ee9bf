import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** One credit to a user: the effect that must happen once per Idempotency-Key. */
@Entity({ name: 'ledger_entries' })
export class LedgerEntry {
  @PrimaryGeneratedColumn('identity', { type: 'bigint' })
  id!: string;

  @Column({ name: 'user_id', type: 'text' })
  userId!: string;

  @Column({ name: 'amount_cents', type: 'integer' })
  amountCents!: number;
}
