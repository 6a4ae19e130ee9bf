import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsInt, IsOptional, IsString, IsUUID, Matches, Max, MaxLength, Min, ValidateBy } from 'class-validator';
import { NoCardNumber } from '../../../card-numbers/card-number';
import { IsCurrency, MAX_AMOUNT, isCurrency } from '../../../money/money';
import { NoControlCharacters } from '../../../http/text';
import { PAYMENT_SOURCE, PAYMENT_SOURCE_MAX_LENGTH, STRIPE_MINIMUM_CHARGE, isStripeCurrency, minimumCharge } from '../../card-network/stripe-rules';

/**
 * The simulator's fault test methods (tok_chargeThenDrop, …Hang, …Error and
 * their pm_card_ names): they charge, then lose the answer. Only the bundled
 * simulator knows them; PaymentsService refuses them when it is not the network.
 */
export function isSimulatorFaultSource(source: string): boolean {
  return /^(tok|pm_card)_chargeThen/.test(source);
}

/**
 * The card network's smallest charge in the payment's currency (Stripe's
 * minimums): refused here, before any call, so a payment the network would
 * refuse never starts.
 */
function AtLeastMinimumCharge(): PropertyDecorator {
  return ValidateBy({
    name: 'atLeastMinimumCharge',
    validator: {
      validate: (value: unknown, args) => {
        const currency = (args?.object as { currency?: unknown }).currency;
        return typeof value !== 'number' || typeof currency !== 'string' || value >= minimumCharge(currency);
      },
      defaultMessage: (args) => {
        const currency = String((args?.object as { currency?: unknown }).currency).toLowerCase();
        return `amount must be at least ${minimumCharge(currency)} (minor units of ${currency}): the card network's minimum charge`;
      },
    },
  });
}

/** A currency the card network charges in (a subset of ISO 4217). */
function ChargeableCurrency(): PropertyDecorator {
  return ValidateBy({
    name: 'chargeableCurrency',
    validator: {
      // An unknown code is IsCurrency's to refuse: one message per mistake.
      validate: (value: unknown) => !isCurrency(value) || isStripeCurrency(value),
      defaultMessage: () => '$property is a currency the card network does not charge in',
    },
  });
}

const MINIMUMS = Object.entries(STRIPE_MINIMUM_CHARGE)
  .map(([currency, minimum]) => `${currency} ${minimum}`)
  .join(', ');

export class CreatePaymentDto {
  @ApiProperty({
    type: 'integer',
    example: 3998,
    minimum: 1,
    maximum: MAX_AMOUNT,
    description: `Integer minor units (cents), at least the card network's minimum charge in the currency (${MINIMUMS}; 1 in other currencies)`,
  })
  @IsInt()
  @Min(1)
  @Max(MAX_AMOUNT)
  @AtLeastMinimumCharge()
  amount!: number;

  @ApiProperty({ example: 'usd', description: 'ISO 4217 code the card network charges in, any case; stored lower-case' })
  @IsCurrency()
  @ChargeableCurrency()
  currency!: string;

  @ApiProperty({
    example: 'tok_visa',
    maxLength: PAYMENT_SOURCE_MAX_LENGTH,
    pattern: PAYMENT_SOURCE.source,
    description:
      'A card token or PaymentMethod id from the card network, never card details: a real token (tok_ and a digit, as Stripe.js makes them: tok_1N3T00LkdIwHu7ix), a real PaymentMethod (pm_1…), a test token (tok_ and letters: tok_visa) or test PaymentMethod (pm_card_visa). Anything else, and any value holding a card number (13–19 digits passing the Luhn check, with or without separators), is refused (400) and neither stored, sent nor logged. Test tokens: tok_visa (succeeds), tok_chargeDeclined (402 card_declined), tok_chargeDeclinedInsufficientFunds (402 insufficient_funds), tok_processingError (502, key released), tok_refundPending / tok_refundPendingFail / tok_refundFail (charge; their refunds answer pending then succeed, pending then fail, succeeded then fail). The fault tokens tok_chargeThenDrop, tok_chargeThenHang and tok_chargeThenError are accepted only while the bundled simulator is the card network.',
  })
  @IsString()
  @MaxLength(PAYMENT_SOURCE_MAX_LENGTH)
  // No $value in these messages: the refused value is never echoed.
  @Matches(PAYMENT_SOURCE, { message: 'source must be a card token (tok_visa, tok_1…) or PaymentMethod id (pm_card_visa, pm_1…) from the card network' })
  @NoCardNumber({ message: 'source must be a token from the card network, never a card number' })
  source!: string;

  @ApiPropertyOptional({ format: 'uuid', description: 'Pay this pending order: amount and currency must match it' })
  @IsOptional()
  @IsUUID()
  order_id?: string;

  @ApiPropertyOptional({ maxLength: 500, example: 'Order #1001', description: 'Stored, returned and sent to the card network: never card data (a card number is refused, 400)' })
  @IsOptional()
  @IsString()
  @MaxLength(500)
  // Refused here, before the card network is asked (PostgreSQL refuses U+0000 in text).
  @NoControlCharacters()
  @NoCardNumber()
  description?: string;
}

export class CreateRefundDto {
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: MAX_AMOUNT, description: 'Minor units; default: what remains unrefunded' })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(MAX_AMOUNT)
  amount?: number;
}
