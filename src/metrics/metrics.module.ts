import { DynamicModule, Global, Module, ModuleMetadata, Type } from '@nestjs/common';
import { Registry } from 'prom-client';
import { MetricsAccess } from './metrics-access';
import { MetricsController } from './metrics.controller';
import { MetricsServer } from './metrics.server';
import { MetricsService } from './metrics.service';

export interface MetricsModuleOptions {
  /** Who may read /metrics (the app: auth's MetricsTokenAccess). */
  access: Type<MetricsAccess>;
  /** The modules that provide `access`. */
  imports: NonNullable<ModuleMetadata['imports']>;
}

/**
 * The app's metrics: the private registry every module adds to (MetricsService)
 * and /metrics, on the API port or on its own. The HTTP histogram is fed by a
 * Fastify hook that configureApp registers (./http-metrics.hook.ts). Who may
 * read /metrics is bound by the app (`access`): metrics imports nothing of
 * auth, which checks the token.
 */
@Global()
@Module({})
export class MetricsModule {
  static forRoot(options: MetricsModuleOptions): DynamicModule {
    return {
      module: MetricsModule,
      imports: options.imports,
      controllers: [MetricsController],
      providers: [
        MetricsService,
        MetricsServer,
        { provide: MetricsAccess, useExisting: options.access },
        // prom-client's Registry class as the token: a module below metrics (database) adds to it without importing metrics.
        { provide: Registry, inject: [MetricsService], useFactory: (metrics: MetricsService) => metrics.registry },
      ],
      exports: [MetricsService, Registry],
    };
  }
}
