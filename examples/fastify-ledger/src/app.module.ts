import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IdempotencyModule } from 'safe-retries';
import { accountScope } from './account.guard';
import { ledgerDataSourceOptions } from './data-source';
import { LedgerController } from './ledger.controller';
import { CREDIT_DELAY_MS, LedgerService } from './ledger.service';

@Module({
  imports: [
    // The same options as `npm run migrate` (src/data-source.ts); run it before starting.
    TypeOrmModule.forRootAsync({ useFactory: () => ledgerDataSourceOptions() }),
    // Keys belong to the account AccountGuard put on the request (acct_…, not a UUID).
    // The module brings its transaction (TransactionHost), its jobs and its tables.
    IdempotencyModule.forRoot({ scope: accountScope }),
  ],
  controllers: [LedgerController],
  providers: [LedgerService, { provide: CREDIT_DELAY_MS, useValue: 0 }],
})
export class AppModule {}
