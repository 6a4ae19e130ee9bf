import { Controller, Get, Header, Headers, Inject } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { problems } from '../http/problem';
import { MetricsTokenRoute } from '../http/route-access';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { MetricsAccess } from './metrics-access';
import { MetricsService } from './metrics.service';

/**
 * /metrics on the API port, only when METRICS_TOKEN is set and METRICS_PORT is
 * not (then MetricsServer serves it on its own port). Otherwise it answers like
 * a route that does not exist. The metrics token, not an API key, opens it: the
 * authentication hook checks it before anything else and counts a wrong or
 * missing one as a failed authentication of the address; the handler asks
 * MetricsAccess again, uncounted.
 */
@ApiExcludeController()
@Controller('metrics')
export class MetricsController {
  constructor(
    private readonly metrics: MetricsService,
    private readonly access: MetricsAccess,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Get()
  @MetricsTokenRoute()
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  scrape(@Headers('authorization') authorization: string | undefined): Promise<string> {
    const { token, port } = this.config.metrics;
    if (token === undefined || port !== undefined) throw problems.notFound('Cannot GET /metrics');
    if (!this.access.allows(authorization)) throw problems.unauthorized('Send Authorization: Bearer <METRICS_TOKEN>.');
    return this.metrics.registry.metrics();
  }
}
