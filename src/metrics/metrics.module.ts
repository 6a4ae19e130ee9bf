import { Global, Module } from '@nestjs/common';
import { MetricsController } from './metrics.controller';
import { MetricsServer } from './metrics.server';
import { MetricsService } from './metrics.service';

/** The HTTP histogram is fed by a Fastify hook that configureApp registers (./http-metrics.hook.ts). */
@Global()
@Module({
  controllers: [MetricsController],
  providers: [MetricsService, MetricsServer],
  exports: [MetricsService],
})
export class MetricsModule {}
