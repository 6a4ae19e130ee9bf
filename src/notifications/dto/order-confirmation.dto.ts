import { ApiProperty } from '@nestjs/swagger';
import { IsIn, IsString, Length, ValidationArguments, isEmail, registerDecorator } from 'class-validator';

const CHANNELS = ['email', 'sms'] as const;
const E164 = /^\+[1-9]\d{6,14}$/;

/** An email address for channel email, an E.164 phone number for channel sms. */
function IsRecipient(): PropertyDecorator {
  return (target, propertyName) =>
    registerDecorator({
      name: 'isRecipient',
      target: target.constructor,
      propertyName: propertyName as string,
      options: { message: 'recipient must be an email address (channel email) or an E.164 phone number (channel sms)' },
      validator: {
        validate: (value: unknown, args: ValidationArguments) =>
          typeof value === 'string' && ((args.object as SendOrderConfirmationDto).channel === 'sms' ? E164.test(value) : isEmail(value)),
      },
    });
}

export class SendOrderConfirmationDto {
  @ApiProperty({ enum: CHANNELS, example: 'email' })
  @IsIn(CHANNELS)
  channel!: (typeof CHANNELS)[number];

  @ApiProperty({ example: 'buyer@example.com', description: 'An email address (channel email) or a phone number in E.164 (channel sms)' })
  @IsString()
  @Length(3, 254)
  @IsRecipient()
  recipient!: string;
}

export class OrderConfirmationResponse {
  @ApiProperty({ format: 'uuid', description: 'The queued confirmation: sent after the commit, under this id as its idempotency key' })
  id!: string;

  @ApiProperty({ format: 'uuid' })
  order_id!: string;

  @ApiProperty({ enum: CHANNELS })
  channel!: (typeof CHANNELS)[number];

  @ApiProperty()
  recipient!: string;
}
