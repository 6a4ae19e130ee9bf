import { Field, InputType, Int, ObjectType } from '@nestjs/graphql';
import { ApiProperty } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsInt,
  IsString,
  Length,
  Matches,
  Max,
  Min,
  ValidateNested,
  ValidationOptions,
  registerDecorator,
} from 'class-validator';
import { NoCardNumber } from '../../card-numbers/card-number';
import { IsCurrency, MAX_AMOUNT } from '../../money/money';
import { NoControlCharacters } from '../../http/text';

/** An order whose total no payment could ever match (0, or above MAX_AMOUNT) is refused when created. */
function IsPayableTotal(options?: ValidationOptions): PropertyDecorator {
  return (target, propertyName) =>
    registerDecorator({
      name: 'isPayableTotal',
      target: target.constructor,
      propertyName: propertyName as string,
      options: { message: `the order total must be between 1 and ${MAX_AMOUNT} minor units`, ...options },
      validator: {
        validate: (items: unknown) => {
          // Malformed items are reported by their own validators.
          if (!Array.isArray(items)) return true;
          let total = 0;
          for (const item of items as Partial<OrderItemDto>[]) {
            if (!Number.isInteger(item?.quantity) || !Number.isInteger(item?.unit_amount)) return true;
            total += item.quantity! * item.unit_amount!;
          }
          return total >= 1 && total <= MAX_AMOUNT;
        },
      },
    });
}

/** An order's line, in requests and responses (GraphQL: `OrderItemInput` in, `OrderItem` out). */
@ObjectType('OrderItem')
@InputType('OrderItemInput')
export class OrderItemDto {
  @ApiProperty({ example: 'sku_tshirt_m', minLength: 1, maxLength: 64, description: 'Stored and returned: never card data (a card number is refused, 400)' })
  @Field()
  @IsString()
  @Length(1, 64)
  @NoControlCharacters()
  @Matches(/^[\x21-\x7e]+$/, { message: 'sku must be printable ASCII without spaces' })
  @NoCardNumber()
  sku!: string;

  @ApiProperty({ type: 'integer', example: 2, minimum: 1, maximum: 1000 })
  @Field(() => Int)
  @IsInt()
  @Min(1)
  @Max(1000)
  quantity!: number;

  @ApiProperty({ type: 'integer', example: 1999, minimum: 0, maximum: MAX_AMOUNT, description: 'Price of one unit in minor units (cents)' })
  @Field(() => Int, { description: 'Price of one unit in minor units (cents)' })
  @IsInt()
  @Min(0)
  @Max(MAX_AMOUNT)
  unit_amount!: number;
}

@InputType('CreateOrderInput')
export class CreateOrderDto {
  @ApiProperty({ example: 'usd', description: 'ISO 4217 code, any case; stored lower-case' })
  @Field({ description: 'ISO 4217 code, any case; stored lower-case' })
  @IsCurrency()
  currency!: string;

  @ApiProperty({
    type: [OrderItemDto],
    minItems: 1,
    maxItems: 100,
    description: `The total (sum of quantity × unit_amount) must be payable: 1 to ${MAX_AMOUNT} minor units`,
  })
  @Field(() => [OrderItemDto])
  @IsArray()
  @IsPayableTotal()
  @ArrayMinSize(1)
  @ArrayMaxSize(100)
  @ValidateNested({ each: true })
  @Type(() => OrderItemDto)
  items!: OrderItemDto[];
}
