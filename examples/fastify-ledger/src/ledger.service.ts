import { Inject, Injectable } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { LedgerEntry } from './ledger-entry.entity';

/** How long a credit takes after its row is written (0; the tests slow it down to make requests overlap). */
export const CREDIT_DELAY_MS = Symbol('CREDIT_DELAY_MS');

export interface CreditDto {
  amount_cents: number;
  memo: string;
}

export interface CreditView {
  id: string;
  account_id: string;
  amount_cents: number;
  memo: string;
  created_at: string;
}

@Injectable()
export class LedgerService {
  constructor(
    // Writes through the ambient transaction that @Idempotent() opens: the row and
    // the stored response commit together, or neither does.
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @Inject(CREDIT_DELAY_MS) private readonly delayMs: number,
  ) {}

  async credit(accountId: string, dto: CreditDto): Promise<CreditView> {
    const entry = await this.txHost.tx.getRepository(LedgerEntry).save({ accountId, amountCents: dto.amount_cents, memo: dto.memo });
    if (this.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    return {
      id: entry.id,
      account_id: entry.accountId,
      amount_cents: entry.amountCents,
      memo: entry.memo,
      created_at: entry.createdAt.toISOString(),
    };
  }
}
