import { ApiProperty } from '@nestjs/swagger';
import { OrderItemDto } from './create-order.dto';

export class OrderResponse {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty({ enum: ['pending', 'paid', 'canceled'], example: 'pending' })
  status!: 'pending' | 'paid' | 'canceled';

  @ApiProperty({ example: 'usd' })
  currency!: string;

  @ApiProperty({ example: 3998, description: 'Sum of quantity x unit_amount, in minor units' })
  amount_total!: number;

  @ApiProperty({ type: [OrderItemDto] })
  items!: OrderItemDto[];

  @ApiProperty({ format: 'date-time' })
  created_at!: string;
}

export class OrderPage {
  @ApiProperty({ enum: ['list'] })
  object!: 'list';

  @ApiProperty({ type: [OrderResponse] })
  data!: OrderResponse[];

  @ApiProperty()
  has_more!: boolean;

  @ApiProperty({ type: String, nullable: true, description: 'Pass as starting_after for the next page' })
  next_cursor!: string | null;
}
