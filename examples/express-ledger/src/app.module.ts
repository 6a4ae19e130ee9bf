import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IdempotencyModule } from 'safe-retries';
import { LedgerEntry } from './ledger-entry.entity';
import { LedgerController } from './ledger.controller';
import { CreateLedgerEntries1797000000000 } from './migrations/1797000000000-CreateLedgerEntries';
import { AuthenticatedRequest } from './user.guard';

@Module({
  imports: [
    // The app's own table comes from its migration, run at startup; the module creates its own tables itself.
    TypeOrmModule.forRoot({
      type: 'postgres',
      url: process.env.DATABASE_URL,
      entities: [LedgerEntry],
      migrations: [CreateLedgerEntries1797000000000],
      migrationsRun: true,
    }),
    // Who owns a key: the user UserGuard put on the request (guards run before the module).
    IdempotencyModule.forRoot({ scope: (req: AuthenticatedRequest) => req.user?.id }),
  ],
  controllers: [LedgerController],
})
export class AppModule {}
