import { Controller, Get, Header } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { MetricsTokenRoute } from '../http/route-access';
import { MetricsService } from './metrics.service';

/**
 * /metrics on the API port. The metrics token, not an API key, opens it, and
 * only where it is served on this port (METRICS_TOKEN set, METRICS_PORT not:
 * otherwise it answers like a route that does not exist): auth's hook decides
 * both before the route is reached, with MetricsAccess, the check
 * MetricsServer makes on its own port.
 */
@ApiExcludeController()
@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: MetricsService) {}

  @Get()
  @MetricsTokenRoute()
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  scrape(): Promise<string> {
    return this.metrics.registry.metrics();
  }
}
