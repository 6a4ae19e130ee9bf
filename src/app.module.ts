import { DynamicModule, MiddlewareConsumer, Module, NestModule } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import { AuthModule } from './auth/auth.module';
import type { RequestWithClient } from './auth/current-client.decorator';
import { JsonOnlyMiddleware } from './common/json-only.middleware';
import { requestId } from './common/request-id';
import { AppConfig } from './config/config';
import { AppConfigModule } from './config/config.module';
import { DatabaseModule } from './database/database.module';
import { HealthModule } from './health/health.module';
import { IdempotencyModule } from './idempotency';
import { MetricsModule } from './metrics/metrics.module';
import { MetricsService } from './metrics/metrics.service';
import { OrdersModule } from './orders/orders.module';
import { PaymentsModule } from './payments/payments.module';

export interface AppModuleOptions {
  config: AppConfig;
  /** The database to use: external (DATABASE_URL) or the embedded one main.ts started. */
  databaseUrl: string;
  /** Apply migrations on boot (default true). */
  migrate?: boolean;
}

@Module({})
export class AppModule implements NestModule {
  static register(options: AppModuleOptions): DynamicModule {
    const { config } = options;
    return {
      module: AppModule,
      imports: [
        AppConfigModule.forRoot(config),
        LoggerModule.forRoot({
          // nestjs-pino's default route pattern ('{/*splat}') is never matched on Fastify: '*path' is, like the app's own middleware.
          forRoutes: ['*path'],
          pinoHttp: {
            level: config.logLevel,
            genReqId: requestId,
            // Secrets never reach the log: the API key is in this header.
            redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' },
            // 401 and 429 are not logged per request (a flood would flood the log): FailedAuthLimiter
            // warns once a minute per address.
            customLogLevel: (_req, res, err) =>
              err || res.statusCode >= 500 ? 'error' : res.statusCode === 401 || res.statusCode === 429 ? 'silent' : res.statusCode >= 400 ? 'warn' : 'info',
            quietReqLogger: true,
          },
        }),
        DatabaseModule.forRoot({
          url: options.databaseUrl,
          poolSize: config.database.poolSize,
          migrate: options.migrate ?? true,
        }),
        MetricsModule,
        IdempotencyModule.forRootAsync({
          inject: [MetricsService],
          useFactory: (metrics: MetricsService) => ({
            lease: config.idempotency.leaseMs,
            retention: config.idempotency.retentionMs,
            claimPoolSize: config.idempotency.claimPoolSize,
            scope: (req) => (req as Pick<RequestWithClient, 'client'>).client?.id,
            registry: metrics.registry,
            purge: {
              enabled: config.idempotency.purge.enabled,
              cron: config.idempotency.purge.cron,
              batchSize: config.idempotency.purge.batchSize,
              budget: config.idempotency.purge.budgetMs,
            },
            replayCache: { maxBytes: config.idempotency.replayCacheBytes },
            recovery: { enabled: config.recovery.enabled, interval: config.recovery.intervalMs },
          }),
        }),
        AuthModule,
        HealthModule,
        OrdersModule,
        PaymentsModule,
      ],
    };
  }

  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(JsonOnlyMiddleware).forRoutes('*path');
  }
}
