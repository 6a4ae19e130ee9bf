import { BadRequestException, Body, Controller, Post, Req, Res, UseGuards } from '@nestjs/common';
import { HttpResponse, Idempotent } from 'safe-retries';
import { AccountGuard, AccountRequest } from './account.guard';
import { CreditDto, CreditView, LedgerService } from './ledger.service';

function validCredit(body: unknown): CreditDto {
  const b = body as Partial<CreditDto> | undefined;
  if (!b || !Number.isInteger(b.amount_cents) || (b.amount_cents as number) <= 0 || typeof b.memo !== 'string') {
    throw new BadRequestException('body must be {"amount_cents": a positive integer, "memo": a string}');
  }
  return { amount_cents: b.amount_cents as number, memo: b.memo };
}

@Controller('credits')
@UseGuards(AccountGuard)
export class LedgerController {
  constructor(private readonly ledger: LedgerService) {}

  /** Exactly once per (account, Idempotency-Key): a retry gets the stored response back. */
  @Post()
  @Idempotent()
  async credit(@Req() req: AccountRequest, @Body() body: unknown, @Res({ passthrough: true }) reply: unknown): Promise<CreditView> {
    const entry = await this.ledger.credit(req.account!.id, validCredit(body));
    HttpResponse.of(reply).setHeader('Location', `/credits/${entry.id}`); // stored and replayed too
    return entry;
  }

  /** The same, but a duplicate waits up to 5 s for the first request and gets its replay instead of a 409. */
  @Post('patient')
  @Idempotent({ wait: '5s' })
  async patientCredit(@Req() req: AccountRequest, @Body() body: unknown): Promise<CreditView> {
    return this.ledger.credit(req.account!.id, validCredit(body));
  }

  /** The control: the same handler without @Idempotent(). Every request writes a row. */
  @Post('unprotected')
  async unprotectedCredit(@Req() req: AccountRequest, @Body() body: unknown): Promise<CreditView> {
    return this.ledger.credit(req.account!.id, validCredit(body));
  }
}
