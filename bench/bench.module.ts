import { Body, Controller, Module, Post, Res } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import type { Response } from 'express';
import { AuthenticatedClient } from '../src/auth/authenticated-client';
import { CurrentClient } from '../src/auth/current-client.decorator';
import { CreatePaymentDto } from '../src/payments/dto/create-payment.dto';
import { PaymentResponse } from '../src/payments/dto/payment.response';
import { PaymentsModule } from '../src/payments/payments.module';
import { PaymentsService } from '../src/payments/payments.service';

/**
 * Exists only in the bench app: POST /payments without @Idempotent(). Same guard,
 * validation, service and one transaction as the real route, minus the claim and
 * the stored response, so the two routes' ratio is the price of exactly-once.
 */
@Controller('bench/payments')
export class UnprotectedPaymentsController {
  constructor(
    private readonly payments: PaymentsService,
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
  ) {}

  @Post()
  async create(
    @CurrentClient() client: AuthenticatedClient,
    @Body() dto: CreatePaymentDto,
    @Res({ passthrough: true }) res: Response,
  ): Promise<PaymentResponse> {
    const payment = await this.txHost.withTransaction(() => this.payments.create(client.id, dto));
    res.location(`/payments/${payment.id}`);
    return payment;
  }
}

@Module({ imports: [PaymentsModule], controllers: [UnprotectedPaymentsController] })
export class BenchModule {}
