import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IdempotencyModule } from 'safe-retries';
import { dataSourceOptions } from './data-source';
import { APPLY_DELAY_MS, PaymentEventsService } from './payment-events.service';
import { WEBHOOK_SECRET, WebhooksController } from './webhooks.controller';

/** WEBHOOK_SECRET: the endpoint's `whsec_…` secret; two, separated by a space, while it is rotated. */
function webhookSecrets(): string[] {
  const secrets = (process.env.WEBHOOK_SECRET ?? '').split(' ').filter(Boolean);
  if (secrets.length === 0) throw new Error('WEBHOOK_SECRET is not set (the endpoint\'s whsec_… secret)');
  return secrets;
}

@Module({
  imports: [
    // The same options as `npm run migrate` (src/data-source.ts); run it before starting.
    TypeOrmModule.forRootAsync({ useFactory: () => dataSourceOptions() }),
    // Brings IdempotentConsumer, its transaction (TransactionHost) and its tables.
    IdempotencyModule.forRoot({}),
  ],
  controllers: [WebhooksController],
  providers: [PaymentEventsService, { provide: APPLY_DELAY_MS, useValue: 0 }, { provide: WEBHOOK_SECRET, useFactory: webhookSecrets }],
})
export class AppModule {}
