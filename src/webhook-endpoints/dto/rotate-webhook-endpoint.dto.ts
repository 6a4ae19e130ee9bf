import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsBoolean, IsOptional } from 'class-validator';

export class RotateWebhookEndpointDto {
  @ApiPropertyOptional({
    description: 'true: no new secret; the overlap of the last rotation ends now, and only the current secret signs from now on',
  })
  @IsOptional()
  @IsBoolean()
  expire_previous?: boolean;
}
