import { Body, Controller, Get, Param, Post, Query, Res } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { AuthenticatedClient } from '../auth/authenticated-client';
import { CurrentClient } from '../auth/current-client.decorator';
import { ApiProblems } from '../common/openapi';
import { PageQueryDto } from '../common/pagination';
import { ParseIdPipe } from '../common/parse-id.pipe';
import { Idempotent } from '../idempotency/idempotent.decorator';
import { CreatePaymentDto, CreateRefundDto } from './dto/create-payment.dto';
import { PaymentPage, PaymentResponse, RefundResponse } from './dto/payment.response';
import { PaymentsService } from './payments.service';

@ApiTags('payments')
@ApiProblems(401)
@Controller('payments')
export class PaymentsController {
  constructor(private readonly payments: PaymentsService) {}

  @Post()
  @Idempotent()
  @ApiOperation({ summary: 'Charge a card, optionally paying a pending order' })
  @ApiCreatedResponse({ type: PaymentResponse, headers: { Location: { description: '/payments/{id}', schema: { type: 'string' } } } })
  @ApiProblems(402, 502, 503)
  async create(
    @CurrentClient() client: AuthenticatedClient,
    @Body() dto: CreatePaymentDto,
    @Res({ passthrough: true }) res: Response,
  ): Promise<PaymentResponse> {
    const payment = await this.payments.create(client.id, dto);
    res.location(`/payments/${payment.id}`);
    return payment;
  }

  @Get()
  @ApiOperation({ summary: 'List payments, newest first (cursor pagination: limit, starting_after)' })
  @ApiOkResponse({ type: PaymentPage })
  @ApiProblems(400)
  list(@CurrentClient() client: AuthenticatedClient, @Query() query: PageQueryDto) {
    return this.payments.list(client.id, query);
  }

  @Get(':id')
  @ApiOperation({ summary: 'Get a payment with its refunds' })
  @ApiOkResponse({ type: PaymentResponse })
  @ApiProblems(404)
  get(@CurrentClient() client: AuthenticatedClient, @Param('id', ParseIdPipe) id: string): Promise<PaymentResponse> {
    return this.payments.get(client.id, id);
  }

  @Post(':id/refunds')
  @Idempotent()
  @ApiOperation({ summary: 'Refund a succeeded payment (default: what remains)' })
  @ApiCreatedResponse({ type: RefundResponse })
  @ApiProblems(404)
  async refund(
    @CurrentClient() client: AuthenticatedClient,
    @Param('id', ParseIdPipe) id: string,
    @Body() dto: CreateRefundDto,
    @Res({ passthrough: true }) res: Response,
  ): Promise<RefundResponse> {
    const refund = await this.payments.refund(client.id, id, dto);
    res.location(`/payments/${id}`);
    return refund;
  }
}
