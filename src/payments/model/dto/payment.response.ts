import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { CHARGE_FAILURES } from '../../card-network/card-network';
import type { DeclineReason } from '../payments.errors';
import { FAILED_BY_OPERATOR } from '../payment-operations';
import { PAYMENT_STATUSES, PaymentStatus } from '../payment.entity';
import { REFUND_STATUSES, RefundStatus } from '../refund.entity';

// These DTOs are the API's shapes: the OpenAPI document is built from them and the
// client's types are generated from the document (packages/client/src/api.generated.ts). Enums
// come from the constants the code itself uses, never a copied list.

/** The failure_code of a failed payment: a decline (a processing_error is never recorded, the payment is released). */
const FAILURE_CODES = [...CHARGE_FAILURES.filter((failure): failure is DeclineReason => failure !== 'processing_error'), FAILED_BY_OPERATOR];

export class RefundResponse {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty({ format: 'uuid' })
  payment_id!: string;

  @ApiProperty({ type: 'integer', example: 1000, description: 'Minor units' })
  amount!: number;

  @ApiProperty({
    enum: REFUND_STATUSES,
    description:
      'processing: reserved, the card network has not answered yet; pending: the card network has the refund and has not settled it (most refunds settle within days; a webhook or the settlement job moves it on); succeeded; failed: the card network could not refund it, or an operator marked it failed, and its amount is refundable again (failure_reason says why); requires_attention: the card network refuses it and cannot tell whether an earlier attempt refunded: a person decides, the amount stays reserved',
  })
  status!: RefundStatus;

  @ApiProperty({ type: 'string', nullable: true, example: null, description: `The card network's reason, when the refund failed (${FAILED_BY_OPERATOR}: an operator marked it failed)` })
  failure_reason!: string | null;

  @ApiProperty({ format: 'date-time' })
  created_at!: string;
}

export class PaymentResponse {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty({
    enum: PAYMENT_STATUSES,
    example: 'succeeded',
    description:
      'processing: the card network has been (or is being) asked and the outcome is not recorded yet; it ends succeeded or failed. requires_attention: its outcome stayed unknown past its bound; a person decides, the order stays reserved',
  })
  status!: PaymentStatus;

  @ApiProperty({ type: 'integer', example: 3998, description: 'Minor units' })
  amount!: number;

  @ApiProperty({ example: 'usd' })
  currency!: string;

  @ApiProperty({ type: String, format: 'uuid', nullable: true })
  order_id!: string | null;

  @ApiProperty({ type: String, nullable: true })
  description!: string | null;

  @ApiProperty({ type: 'integer', example: 0, description: 'Minor units refunded so far, refunds in processing included' })
  amount_refunded!: number;

  @ApiProperty({ type: String, nullable: true, enum: FAILURE_CODES, description: 'Why a failed payment failed' })
  failure_code!: string | null;

  @ApiProperty({ format: 'date-time' })
  created_at!: string;

  @ApiPropertyOptional({ type: [RefundResponse], description: 'GET /payments/{id} only' })
  refunds?: RefundResponse[];
}

export class PaymentPage {
  @ApiProperty({ enum: ['list'] })
  object!: 'list';

  @ApiProperty({ type: [PaymentResponse] })
  data!: PaymentResponse[];

  @ApiProperty()
  has_more!: boolean;

  @ApiProperty({ type: String, nullable: true })
  next_cursor!: string | null;
}
