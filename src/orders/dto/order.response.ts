import { Field, ID, Int, ObjectType, registerEnumType } from '@nestjs/graphql';
import { ApiProperty } from '@nestjs/swagger';
import type { OrderStatus } from '../order.entity';
import { OrderItemDto } from './create-order.dto';

/** Every OrderStatus, for the document's enum (the client's OrderStatus is generated from it). */
const ORDER_STATUSES = ['pending', 'paid', 'canceled'] as const satisfies readonly OrderStatus[];
// The compiler holds the list to the entity's union both ways: `satisfies` refuses an
// unknown status, this refuses a missing one.
type MissingOrderStatus = Exclude<OrderStatus, (typeof ORDER_STATUSES)[number]>;
const _allOrderStatuses: [MissingOrderStatus] extends [never] ? true : MissingOrderStatus = true;

/** The same statuses as GraphQL's `OrderStatus` enum (its values are the strings themselves). */
const OrderStatusEnum = Object.fromEntries(ORDER_STATUSES.map((status) => [status, status])) as { [S in OrderStatus]: S };
registerEnumType(OrderStatusEnum, { name: 'OrderStatus' });

/** An order, as REST answers it and as GraphQL's `Order`. */
@ObjectType('Order')
export class OrderResponse {
  @ApiProperty({ format: 'uuid' })
  @Field(() => ID)
  id!: string;

  @ApiProperty({ enum: ORDER_STATUSES, example: 'pending' })
  @Field(() => OrderStatusEnum)
  status!: OrderStatus;

  @ApiProperty({ example: 'usd' })
  @Field()
  currency!: string;

  @ApiProperty({ type: 'integer', example: 3998, description: 'Sum of quantity x unit_amount, in minor units' })
  @Field(() => Int, { description: 'Sum of quantity x unit_amount, in minor units' })
  amount_total!: number;

  @ApiProperty({ type: [OrderItemDto] })
  @Field(() => [OrderItemDto])
  items!: OrderItemDto[];

  @ApiProperty({ format: 'date-time' })
  @Field({ description: 'ISO 8601, UTC' })
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
