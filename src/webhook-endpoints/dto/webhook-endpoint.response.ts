import { ApiProperty } from '@nestjs/swagger';

/** An endpoint as listed: never its secret. */
export class WebhookEndpointResponse {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty({ example: 'https://hooks.example.com/payments' })
  url!: string;

  @ApiProperty({ type: [String], example: ['payment.succeeded'] })
  event_types!: string[];

  @ApiProperty({ format: 'date-time' })
  created_at!: string;
}

/** An endpoint as created or rotated: with its signing secret, shown only in this answer. */
export class WebhookEndpointWithSecretResponse extends WebhookEndpointResponse {
  @ApiProperty({ example: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', description: 'The signing secret (Standard Webhooks); shown only now' })
  secret!: string;
}

export class WebhookEndpointList {
  @ApiProperty({ enum: ['list'] })
  object!: 'list';

  @ApiProperty({ type: [WebhookEndpointResponse] })
  data!: WebhookEndpointResponse[];
}
