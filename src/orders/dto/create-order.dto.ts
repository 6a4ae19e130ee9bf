import { ApiProperty } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsInt, IsString, Length, Matches, Max, Min, ValidateNested } from 'class-validator';
import { IsCurrency, MAX_AMOUNT } from '../../common/money';

export class OrderItemDto {
  @ApiProperty({ example: 'sku_tshirt_m', minLength: 1, maxLength: 64 })
  @IsString()
  @Length(1, 64)
  @Matches(/^[\x21-\x7e]+$/, { message: 'sku must be printable ASCII without spaces' })
  sku!: string;

  @ApiProperty({ example: 2, minimum: 1, maximum: 1000 })
  @IsInt()
  @Min(1)
  @Max(1000)
  quantity!: number;

  @ApiProperty({ example: 1999, minimum: 0, maximum: MAX_AMOUNT, description: 'Price of one unit in minor units (cents)' })
  @IsInt()
  @Min(0)
  @Max(MAX_AMOUNT)
  unit_amount!: number;
}

export class CreateOrderDto {
  @ApiProperty({ example: 'usd', description: 'ISO 4217 code, any case; stored lower-case' })
  @IsCurrency()
  currency!: string;

  @ApiProperty({ type: [OrderItemDto], minItems: 1, maxItems: 100 })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(100)
  @ValidateNested({ each: true })
  @Type(() => OrderItemDto)
  items!: OrderItemDto[];
}
