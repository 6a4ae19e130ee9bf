import { Module } from '@nestjs/common';
import { PaymentsModule } from '../payments/payments.module';
import { IdempotencyKeysController } from './idempotency-keys.controller';

/** GET /idempotency-keys/{key}: the library's lookup (IdempotencyKeys), as the API's route, and whether a person holds the operation. */
@Module({ imports: [PaymentsModule], controllers: [IdempotencyKeysController] })
export class IdempotencyKeysModule {}
