import { Controller, Get, Header, Headers, Inject, Ip } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { FailedAuthLimiter } from '../auth/failed-auth.limiter';
import { Public } from '../auth/public.decorator';
import { problems } from '../common/problem';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { isMetricsTokenValid } from './metrics-access';
import { MetricsService } from './metrics.service';

/**
 * /metrics on the API port, only when METRICS_TOKEN is set and METRICS_PORT is
 * not (then MetricsServer serves it on its own port). Otherwise it answers like
 * a route that does not exist. Public: the metrics token, not an API key, opens it;
 * a wrong or missing token is a failed authentication of the address (FailedAuthLimiter).
 */
@ApiExcludeController()
@Public()
@Controller('metrics')
export class MetricsController {
  constructor(
    private readonly metrics: MetricsService,
    private readonly failedAuth: FailedAuthLimiter,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Get()
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  scrape(@Headers('authorization') authorization: string | undefined, @Ip() ip: string): Promise<string> {
    const { token, port } = this.config.metrics;
    if (token === undefined || port !== undefined) throw problems.notFound('Cannot GET /metrics');
    if (!isMetricsTokenValid(authorization, token)) {
      this.failedAuth.recordFailure(ip);
      throw problems.unauthorized('Send Authorization: Bearer <METRICS_TOKEN>.');
    }
    return this.metrics.registry.metrics();
  }
}
