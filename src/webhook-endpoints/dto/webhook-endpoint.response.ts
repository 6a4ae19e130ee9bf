import { ApiProperty } from '@nestjs/swagger';

/** An endpoint's statuses: `disabled` gets nothing until POST /webhook-endpoints/{id}/enable. */
export const WEBHOOK_ENDPOINT_STATUSES = ['enabled', 'disabled'] as const;
export type WebhookEndpointStatus = (typeof WEBHOOK_ENDPOINT_STATUSES)[number];

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

  @ApiProperty({ enum: WEBHOOK_ENDPOINT_STATUSES, description: '`disabled`: after a 410 Gone, or 5 days of failed deliveries; nothing is sent until it is enabled again' })
  status!: WebhookEndpointStatus;

  @ApiProperty({ type: String, nullable: true, example: 'the endpoint answered 410 Gone', description: 'Why it was disabled (null while enabled)' })
  disabled_reason!: string | null;

  @ApiProperty({ type: String, format: 'date-time', nullable: true, description: 'Since when every delivery has failed (null after a success); failing, it is paused as a whole, one probe delivery at a time' })
  failing_since!: string | null;
}

/** An endpoint as created or rotated: with its signing secret, shown only in this answer. */
export class WebhookEndpointWithSecretResponse extends WebhookEndpointResponse {
  @ApiProperty({ example: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', description: 'The signing secret (Standard Webhooks); shown only now' })
  secret!: string;
}

/** Which secret an answer shows (its endpoint's `secret_version`): never sent, JSON.stringify skips symbol keys. */
export const SECRET_VERSION = Symbol('secretVersion');

/** A created or rotated endpoint as answered, and which of its secrets the answer shows (for SecretAnswers). */
export type ShownSecret = WebhookEndpointWithSecretResponse & { [SECRET_VERSION]: number };

export class WebhookEndpointList {
  @ApiProperty({ enum: ['list'] })
  object!: 'list';

  @ApiProperty({ type: [WebhookEndpointResponse] })
  data!: WebhookEndpointResponse[];
}
