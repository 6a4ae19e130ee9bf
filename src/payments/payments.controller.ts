import { Body, Controller, Get, Param, Post, Query } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AuthenticatedClient } from '../auth/authenticated-client';
import { CurrentClient } from '../auth/current-client.decorator';
import { ApiProblems } from '../common/openapi';
import { PageQueryDto } from '../common/pagination';
import { ParseIdPipe } from '../common/parse-id.pipe';
import { Idempotent, Operation } from 'safe-retries';
import { ChargeRoute } from './charge-admission';
import { CreatePaymentDto, CreateRefundDto } from './dto/create-payment.dto';
import { PaymentPage, PaymentResponse, RefundResponse } from './dto/payment.response';
import { PAYMENT_OPERATION, PaymentOperation, REFUND_OPERATION, RefundOperation } from './payment-operations';
import { PaymentsService } from './payments.service';
import { RefundsService } from './refunds.service';

@ApiTags('payments')
@ApiProblems(401)
@Controller('payments')
export class PaymentsController {
  constructor(
    private readonly payments: PaymentsService,
    private readonly refunds: RefundsService,
  ) {}

  @Post()
  @ChargeRoute()
  @Idempotent({ phased: PAYMENT_OPERATION })
  @ApiOperation({
    summary: 'Charge a card, optionally paying a pending order',
    description:
      'Runs in phases: the payment is recorded as processing, an unconfirmed PaymentIntent is created at the card network and its id recorded, the intent is confirmed, then the outcome is recorded with the stored response. 503 card_network_unavailable means the outcome is not known yet: retry with the same key and body (it resumes by asking the network about that intent, never charges twice). A payment still processing at the network is settled by its webhook or a later retry. One whose outcome stays unknown for 24 hours is handed to a person: 409 requires_attention (with attention_id) until an operator decides, then the key answers with the outcome (422 failed_by_operator when they mark it failed).',
  })
  @ApiCreatedResponse({ type: PaymentResponse, headers: { Location: { description: '/payments/{id}', schema: { type: 'string' } } } })
  @ApiProblems(402, 502, 503)
  create(
    @CurrentClient() client: AuthenticatedClient,
    @Body() dto: CreatePaymentDto,
    @Operation() op: PaymentOperation,
  ): Promise<PaymentResponse> {
    return this.payments.create(client.id, dto, op);
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
  @ChargeRoute()
  @Idempotent({ phased: REFUND_OPERATION })
  @ApiOperation({
    summary: 'Refund a succeeded payment (default: what remains)',
    description:
      "Runs in phases like a payment: the amount is reserved, the card network is asked to refund it, then the refund is recorded with the network's state: succeeded, or pending (most refunds settle later; the card network's webhook or the settlement job records the end, and a refund that fails later gives its amount back: see GET /payments/{id}). 502 card_network_error: the network refused this refund, nothing was refunded. 503: the outcome is not known yet; retry with the same key and body. 409 requires_attention: the network refuses the refund and cannot tell whether an earlier attempt made it (or its outcome stayed unknown for 24 hours); its amount stays reserved until an operator decides, then the key answers with the outcome (422 failed_by_operator when they mark it failed).",
  })
  @ApiCreatedResponse({ type: RefundResponse })
  @ApiProblems(404, 502, 503)
  refund(
    @CurrentClient() client: AuthenticatedClient,
    @Param('id', ParseIdPipe) id: string,
    @Body() dto: CreateRefundDto,
    @Operation() op: RefundOperation,
  ): Promise<RefundResponse> {
    return this.refunds.refund(client.id, id, dto, op);
  }
}
