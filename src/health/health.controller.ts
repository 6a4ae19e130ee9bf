import { Controller, Get } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiServiceUnavailableResponse, ApiTags } from '@nestjs/swagger';
import { HealthCheck } from '@nestjs/terminus';
import type { HealthCheckResult } from '@nestjs/terminus';
import { problems } from '../http/problem';
import { Public } from '../http/route-access';
import { HealthService } from './health.service';

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(private readonly health: HealthService) {}

  @Get()
  @Public()
  @HealthCheck({ swaggerDocumentation: false })
  @ApiOperation({ summary: 'Liveness and database reachability, from a check at most 1 s old (no API key needed)' })
  @ApiOkResponse({ description: 'The database answers.' })
  @ApiServiceUnavailableResponse({ description: 'The database does not answer (problem+json, Retry-After).' })
  async check(): Promise<HealthCheckResult> {
    const outcome = await this.health.check();
    if (!outcome.up) throw problems.serviceUnavailable('The database does not answer.');
    return outcome.result;
  }
}
