import { Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IdempotencyModule, transactionalClsModule } from 'safe-retries';
import { accountScope } from './account.guard';
import { ledgerDataSourceOptions } from './data-source';
import { LedgerController } from './ledger.controller';
import { CREDIT_DELAY_MS, LedgerService } from './ledger.service';

@Module({
  imports: [
    // The same options as `npm run migrate` (src/data-source.ts); run it before starting.
    TypeOrmModule.forRootAsync({ useFactory: () => ledgerDataSourceOptions() }),
    // The ambient transaction the module opens around each @Idempotent() handler.
    transactionalClsModule(),
    // The scheduler the module's purge and recovery jobs (both on by default) are added to.
    ScheduleModule.forRoot(),
    // Keys belong to the account AccountGuard put on the request (acct_…, not a UUID).
    IdempotencyModule.forRoot({ scope: accountScope }),
  ],
  controllers: [LedgerController],
  providers: [LedgerService, { provide: CREDIT_DELAY_MS, useValue: 0 }],
})
export class AppModule {}
