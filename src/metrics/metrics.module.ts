import { Global, Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { MetricsController } from './metrics.controller';
import { MetricsServer } from './metrics.server';
import { MetricsService } from './metrics.service';

/** The HTTP histogram is fed by a Fastify hook that configureApp registers (./http-metrics.hook.ts). */
@Global()
@Module({
  // A wrong metrics token counts as a failed authentication (FailedAuthLimiter).
  imports: [AuthModule],
  controllers: [MetricsController],
  providers: [MetricsService, MetricsServer],
  exports: [MetricsService],
})
export class MetricsModule {}
