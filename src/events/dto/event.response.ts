import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsInt, IsOptional, IsUUID, Matches, Max, Min } from 'class-validator';
import { EVENT_TYPES } from '../../event-types/event-types';

export const DEFAULT_EVENTS_PAGE = 20;

/** An event id: `evt_` and 32 hex digits. */
export const EVENT_ID = /^evt_[0-9a-f]{32}$/;

export class EventResponse {
  @ApiProperty({ example: 'evt_3f6c2a1e9b0d4c7f8a5e2d1c0b9a8f7e' })
  id!: string;

  @ApiProperty({ enum: ['event'] })
  object!: 'event';

  @ApiProperty({ enum: EVENT_TYPES, example: 'payment.succeeded' })
  type!: string;

  @ApiProperty({ type: 'object', additionalProperties: true, description: 'The resource (payment, refund, order or webhook endpoint) as the API answers it, at the change' })
  data!: Record<string, unknown>;

  @ApiProperty({ format: 'date-time' })
  created_at!: string;
}

export class EventPage {
  @ApiProperty({ enum: ['list'] })
  object!: 'list';

  @ApiProperty({ type: [EventResponse] })
  data!: EventResponse[];

  @ApiProperty()
  has_more!: boolean;

  @ApiProperty({ type: String, nullable: true, description: 'Pass as starting_after for the next page' })
  next_cursor!: string | null;
}

export class EventQueryDto {
  @ApiPropertyOptional({ minimum: 1, maximum: 100, default: DEFAULT_EVENTS_PAGE, description: 'Items per page' })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(100)
  limit?: number;

  @ApiPropertyOptional({ description: 'Cursor: the id of the last event of the previous page' })
  @IsOptional()
  @Matches(EVENT_ID, { message: 'starting_after must be an event id' })
  starting_after?: string;
}

export class RedeliverDto {
  @ApiPropertyOptional({ format: 'uuid', description: 'Only this endpoint; every endpoint subscribed to the event type when absent' })
  @IsOptional()
  @IsUUID()
  endpoint_id?: string;
}

export class RedeliverResponse {
  @ApiProperty({ type: [String], description: 'The endpoints the event is queued for' })
  endpoint_ids!: string[];
}

/** Attempts listed per event: the newest this many. */
export const MAX_ATTEMPTS_LISTED = 100;

export class DeliveryAttemptResponse {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty({ format: 'uuid' })
  endpoint_id!: string;

  @ApiProperty({ description: "The attempt's number for this endpoint's message (1 for the first send)" })
  attempt!: number;

  @ApiProperty({ type: Number, nullable: true, description: "The receiver's HTTP status; null when no answer came" })
  status!: number | null;

  @ApiProperty({
    type: String,
    nullable: true,
    enum: ['refused_address', 'dns', 'connection_refused', 'connection_reset', 'connect_timeout', 'response_timeout', 'tls', 'aborted', 'network', 'http_status'],
    description: 'Why the attempt failed; null when it succeeded or has not finished',
  })
  error_class!: string | null;

  @ApiProperty({ type: String, nullable: true, description: 'What went wrong, in words' })
  error!: string | null;

  @ApiProperty({ type: String, nullable: true, description: "The start of the receiver's answer (at most 1 KiB)" })
  response_excerpt!: string | null;

  @ApiProperty({ format: 'date-time' })
  started_at!: string;

  @ApiProperty({ type: String, format: 'date-time', nullable: true, description: 'Null until its end is written, just after the answer; for good when the sending process stopped (it was retried)' })
  finished_at!: string | null;

  @ApiProperty({ type: Number, nullable: true })
  duration_ms!: number | null;
}

export class DeliveryAttemptList {
  @ApiProperty({ enum: ['list'] })
  object!: 'list';

  @ApiProperty({ type: [DeliveryAttemptResponse], description: `Newest first, at most ${MAX_ATTEMPTS_LISTED}` })
  data!: DeliveryAttemptResponse[];
}
