import { Body, Controller, Param, Post } from '@nestjs/common';
import { ApiCreatedResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Idempotent, Operation } from 'safe-retries';
import { AuthenticatedClient } from '../../auth/authenticated-client';
import { CurrentClient } from '../../auth/current-client.decorator';
import { ApiProblems } from '../../http/openapi';
import { ParseIdPipe } from '../../http/parse-id.pipe';
import { ChargeRoute } from '../admission/charge-admission';
import { CreateRefundDto } from '../model/dto/create-payment.dto';
import { RefundResponse } from '../model/dto/payment.response';
import { REFUND_OPERATION, RefundOperation } from '../model/payment-operations';
import { RefundsService } from './refunds.service';

/** A payment's refunds: under /payments/{id}, beside the payment's own routes (PaymentsController). */
@ApiTags('payments')
@ApiProblems(401)
@Controller('payments')
export class RefundsController {
  constructor(private readonly refunds: RefundsService) {}

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
