import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

export const KEY_STATES = ['unknown', 'in_progress', 'completed'] as const;

/** Where the operation sent with an Idempotency-Key stands (GET /idempotency-keys/{key}). */
/** An operation handed to a person (GET /payments/{id} shows it as requires_attention). */
export class KeyAttention {
  @ApiProperty({ format: 'uuid', description: "The hand-over's id, for your support request" })
  attention_id!: string;

  @ApiProperty({ enum: ['payment', 'refund'] })
  object!: 'payment' | 'refund';

  @ApiProperty({ format: 'uuid', description: 'The payment or refund' })
  id!: string;
}

export class KeyOutcomeResponse {
  @ApiProperty({ example: '8e03978e-40d5-43e8-bc93-6894a57f9324', description: 'The key, normalised (a quoted form is unquoted)' })
  key!: string;

  @ApiProperty({
    enum: KEY_STATES,
    description:
      'unknown: no operation of yours has this key (never received, or its retention ran out: it is new again); in_progress: it is running, or its outcome is not known yet (a retry with the same body resumes it), or it waits for a person (requires_attention: a retry does not resume it); completed: it ended, and a retry with the same body replays its response',
  })
  state!: (typeof KEY_STATES)[number];

  @ApiPropertyOptional({ type: 'integer', example: 201, description: 'completed: the status of the stored response' })
  status?: number;

  @ApiPropertyOptional({ format: 'date-time', description: 'completed: when the stored response stops being kept (database clock)' })
  expires_at?: string;

  @ApiPropertyOptional({ type: 'integer', example: 0, description: 'in_progress: seconds until a retry may take the operation over (0: now)' })
  retry_after?: number;

  @ApiPropertyOptional({
    type: KeyAttention,
    description:
      'in_progress only: the operation was handed to a person (the card network refuses it, or its outcome stayed unknown for 24 hours). A retry answers 409 requires_attention and resumes nothing; once an operator decides, the key answers with the outcome',
  })
  requires_attention?: KeyAttention;
}
