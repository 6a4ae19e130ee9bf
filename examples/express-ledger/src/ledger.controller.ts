import { BadRequestException, Body, Controller, Post, Req, UseGuards } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Idempotent } from 'safe-retries';
import { LedgerEntry } from './ledger-entry.entity';
import { AuthenticatedRequest, UserGuard } from './user.guard';

export interface CreditBody {
  amount_cents?: unknown;
}

export interface CreditView {
  id: string;
  user_id: string;
  amount_cents: number;
}

const MAX_CENTS = 100_000_000;

@Controller('credits')
@UseGuards(UserGuard)
export class LedgerController {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  /** Exactly once per (user, Idempotency-Key): a retry gets the stored 201 back. */
  @Post()
  @Idempotent()
  async credit(@Req() req: AuthenticatedRequest, @Body() body: CreditBody): Promise<CreditView> {
    const amount = body?.amount_cents;
    if (typeof amount !== 'number' || !Number.isInteger(amount) || amount < 1 || amount > MAX_CENTS) {
      throw new BadRequestException(`body must be {"amount_cents": an integer from 1 to ${MAX_CENTS}}`);
    }
    // Through the key's transaction: the row and the stored response commit together, or neither does.
    const entry = await this.txHost.tx.getRepository(LedgerEntry).save({ userId: req.user!.id, amountCents: amount });
    return { id: entry.id, user_id: entry.userId, amount_cents: entry.amountCents };
  }
}
