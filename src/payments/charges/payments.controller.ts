import { Body, Controller, Get, Param, Post, Query } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AuthenticatedClient } from '../../auth/authenticated-client';
import { CurrentClient } from '../../auth/current-client.decorator';
import { ApiProblems } from '../../http/openapi';
import { PageQueryDto } from '../../http/pagination';
import { ParseIdPipe } from '../../http/parse-id.pipe';
import { Idempotent, Operation } from 'safe-retries';
import { ChargeRoute } from '../admission/charge-admission';
import { CreatePaymentDto } from '../model/dto/create-payment.dto';
import { PaymentPage, PaymentResponse } from '../model/dto/payment.response';
import { PAYMENT_OPERATION, PaymentOperation } from '../model/payment-operations';
import { PaymentsService } from './payments.service';

@ApiTags('payments')
@ApiProblems(401)
@Controller('payments')
export class PaymentsController {
  constructor(private readonly payments: PaymentsService) {}

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
}
