import { Controller, Get } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiServiceUnavailableResponse, ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, TypeOrmHealthIndicator } from '@nestjs/terminus';
import { ServiceUnavailableException } from '@nestjs/common';
import type { HealthCheckResult } from '@nestjs/terminus';
import { Public } from '../auth/public.decorator';
import { problems } from '../common/problem';

@ApiTags('health')
@Public()
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly db: TypeOrmHealthIndicator,
  ) {}

  @Get()
  @HealthCheck({ swaggerDocumentation: false })
  @ApiOperation({ summary: 'Liveness and database reachability (no API key needed)' })
  @ApiOkResponse({ description: 'The database answers.' })
  @ApiServiceUnavailableResponse({ description: 'The database does not answer (problem+json, Retry-After).' })
  async check(): Promise<HealthCheckResult> {
    try {
      return await this.health.check([() => this.db.pingCheck('database', { timeout: 1_500 })]);
    } catch (error) {
      if (error instanceof ServiceUnavailableException) {
        throw problems.serviceUnavailable('The database does not answer.');
      }
      throw error;
    }
  }
}
