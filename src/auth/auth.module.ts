import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ThrottlerModule } from '@nestjs/throttler';
import { TypeOrmModule } from '@nestjs/typeorm';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { ApiKeyGuard } from './api-key.guard';
import { ClientThrottlerGuard } from './client-throttler.guard';
import { ClientKeyEntity } from './client-key.entity';
import { ClientKeysRepository } from './client-keys.repository';
import { ClientEntity } from './client.entity';
import { ClientsService } from './clients.service';
import { FailedAuthLimiter } from './failed-auth.limiter';
import { MetricsTokenAccess } from './metrics-token.access';
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
    // Guards run in this order: the client is known before it is throttled.
    { provide: APP_GUARD, useClass: ApiKeyGuard },
    { provide: APP_GUARD, useClass: ClientThrottlerGuard },
  ],
  exports: [ClientsService, FailedAuthLimiter, MetricsTokenAccess],
})
export class AuthModule {}
