import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

export const KEY_STATES = ['unknown', 'in_progress', 'completed'] as const;

/** Where the operation sent with an Idempotency-Key stands (GET /idempotency-keys/{key}). */
export class KeyOutcomeResponse {
  @ApiProperty({ example: '8e03978e-40d5-43e8-bc93-6894a57f9324', description: 'The key, normalised (a quoted form is unquoted)' })
  key!: string;

  @ApiProperty({
    enum: KEY_STATES,
    description:
      'unknown: no operation of yours has this key (never received, or its retention ran out: it is new again); in_progress: it is running, or its outcome is not known yet (retry it with the same body to resume it); completed: it ended, and a retry with the same body replays its response',
  })
  state!: (typeof KEY_STATES)[number];

  @ApiPropertyOptional({ type: 'integer', example: 201, description: 'completed: the status of the stored response' })
  status?: number;

  @ApiPropertyOptional({ format: 'date-time', description: 'completed: when the stored response stops being kept (database clock)' })
  expires_at?: string;

  @ApiPropertyOptional({ type: 'integer', example: 0, description: 'in_progress: seconds until a retry may take the operation over (0: now)' })
  retry_after?: number;
}
