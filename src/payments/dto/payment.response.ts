import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

export class RefundResponse {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty({ format: 'uuid' })
  payment_id!: string;

  @ApiProperty({ example: 1000, description: 'Minor units' })
  amount!: number;

  @ApiProperty({ format: 'date-time' })
  created_at!: string;
}

export class PaymentResponse {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty({ enum: ['succeeded', 'failed'], example: 'succeeded' })
  status!: 'succeeded' | 'failed';

  @ApiProperty({ example: 3998, description: 'Minor units' })
  amount!: number;

  @ApiProperty({ example: 'usd' })
  currency!: string;

  @ApiProperty({ type: String, format: 'uuid', nullable: true })
  order_id!: string | null;

  @ApiProperty({ type: String, nullable: true })
  description!: string | null;

  @ApiProperty({ example: 0, description: 'Minor units refunded so far' })
  amount_refunded!: number;

  @ApiProperty({ type: String, nullable: true, enum: ['card_declined', 'insufficient_funds'], description: 'Why a failed payment failed' })
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
