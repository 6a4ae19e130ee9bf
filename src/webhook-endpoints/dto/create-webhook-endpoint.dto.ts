import { ApiProperty } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayMinSize, ArrayUnique, IsArray, IsIn, IsString, MaxLength } from 'class-validator';
import { ALL_EVENTS, EVENT_TYPES } from '../../event-types/event-types';

export const MAX_URL_LENGTH = 2048;

export class CreateWebhookEndpointDto {
  @ApiProperty({ example: 'https://hooks.example.com/payments', maxLength: MAX_URL_LENGTH, description: 'https (http only outside production); a public address' })
  @IsString()
  @MaxLength(MAX_URL_LENGTH)
  url!: string;

  @ApiProperty({ type: [String], enum: [...EVENT_TYPES, ALL_EVENTS], example: ['payment.succeeded', 'refund.succeeded'], description: 'The event types to deliver, or ["*"] for all' })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(EVENT_TYPES.length)
  @ArrayUnique()
  @IsIn([...EVENT_TYPES, ALL_EVENTS], { each: true })
  event_types!: string[];
}
