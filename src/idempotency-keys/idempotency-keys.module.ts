import { Module } from '@nestjs/common';
import { IdempotencyKeysController } from './idempotency-keys.controller';

/** GET /idempotency-keys/{key}: the library's lookup (IdempotencyKeys), as the API's route. */
@Module({ controllers: [IdempotencyKeysController] })
export class IdempotencyKeysModule {}
