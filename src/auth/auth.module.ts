import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ThrottlerModule } from '@nestjs/throttler';
import { TypeOrmModule } from '@nestjs/typeorm';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { Authentication } from './authentication';
import { ClientThrottlerGuard } from './client-throttler.guard';
import { ClientKeyEntity } from './client-key.entity';
import { ClientKeysRepository } from './client-keys.repository';
import { ClientEntity } from './client.entity';
import { ClientsService } from './clients.service';
import { FailedAuthLimiter } from './failed-auth.limiter';
import { MetricsTokenAccess } from './metrics-token.access';
import { WebhookSignatureLimiter } from './webhook-signature.limiter';
import { REDELIVERIES_PER_HOUR, isRedeliveryRoute } from '../http/route-access';

@Module({
  imports: [
    TypeOrmModule.forFeature([ClientEntity, ClientKeyEntity]),
    ThrottlerModule.forRootAsync({
      inject: [APP_CONFIG],
      // The library's in-memory storage; the throttler's name suffixes its headers (X-RateLimit-Limit-client, ...).
      useFactory: (config: AppConfig) => ({
        throttlers: [
          { name: 'client', ttl: 1_000, limit: config.rateLimit.perClientPerSecond },
          // Its own budget, on RedeliveryRoute() routes only (X-RateLimit-Limit-redeliveries, ...).
          { name: 'redeliveries', ttl: 3_600_000, limit: REDELIVERIES_PER_HOUR, skipIf: (context) => !isRedeliveryRoute(context) },
        ],
      }),
    }),
  ],
  providers: [
    ClientKeysRepository,
    ClientsService,
    FailedAuthLimiter,
    MetricsTokenAccess,
    WebhookSignatureLimiter,
    // Its hooks are installed by configureApp: every request is authenticated before any guard runs.
    Authentication,
    { provide: APP_GUARD, useClass: ClientThrottlerGuard },
  ],
  exports: [ClientsService, FailedAuthLimiter, MetricsTokenAccess, Authentication],
})
export class AuthModule {}
