import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsInt, IsOptional, IsString, IsUUID, Length, Matches, Max, MaxLength, Min } from 'class-validator';
import { IsCurrency, MAX_AMOUNT } from '../../common/money';
import { NoControlCharacters } from '../../common/text';

export class CreatePaymentDto {
  @ApiProperty({ example: 3998, minimum: 1, maximum: MAX_AMOUNT, description: 'Integer minor units (cents)' })
  @IsInt()
  @Min(1)
  @Max(MAX_AMOUNT)
  amount!: number;

  @ApiProperty({ example: 'usd', description: 'ISO 4217 code, any case; stored lower-case' })
  @IsCurrency()
  currency!: string;

  @ApiProperty({
    example: 'tok_visa',
    description:
      'Card token. Test tokens: tok_visa (succeeds), tok_chargeDeclined (402 card_declined), tok_chargeDeclinedInsufficientFunds (402 insufficient_funds), tok_processingError (502, key released).',
  })
  @IsString()
  @Length(1, 255)
  @Matches(/^[A-Za-z0-9_]+$/, { message: 'source must be a card token such as tok_visa' })
  source!: string;

  @ApiPropertyOptional({ format: 'uuid', description: 'Pay this pending order: amount and currency must match it' })
  @IsOptional()
  @IsUUID()
  order_id?: string;

  @ApiPropertyOptional({ maxLength: 500, example: 'Order #1001' })
  @IsOptional()
  @IsString()
  @MaxLength(500)
  // Refused here, before the card network is asked (PostgreSQL refuses U+0000 in text).
  @NoControlCharacters()
  description?: string;
}

export class CreateRefundDto {
  @ApiPropertyOptional({ minimum: 1, maximum: MAX_AMOUNT, description: 'Minor units; default: what remains unrefunded' })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(MAX_AMOUNT)
  amount?: number;
}
