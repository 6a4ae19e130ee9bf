import { ConfigurableModuleBuilder, Global, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { TransactionHost } from '@nestjs-cls/transactional';
import { ClsService } from 'nestjs-cls';
import { Registry } from 'prom-client';
import { IdempotencyContext } from './idempotency.context';
import { IdempotencyKeys } from './idempotency-keys.service';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { IdempotencyMetrics } from './idempotency.metrics';
import { IdempotencyPurgeService } from './idempotency-purge.service';
import { IdempotencyRecovery } from './idempotency-recovery.service';
import { IdempotentRoutes } from './idempotent-routes';
import { IdempotencyStores } from './idempotency-stores';
import { IdempotentConsumer } from './idempotent-consumer';
import { IDEMPOTENCY_CLS, IDEMPOTENCY_OPTIONS, IDEMPOTENCY_REGISTRY, IDEMPOTENCY_TX_HOST, ResolvedIdempotencyOptions, resolveIdempotencyOptions } from './idempotency.options';
import { IdempotencyModuleOptions } from './module-options';
import { IDEMPOTENCY_SCHEDULER, idempotencyScheduler } from './idempotency.scheduler';
import { PostgresIdempotencyStore } from './postgres/postgres-idempotency.store';
import { RedisIdempotencyStore } from './redis/redis-idempotency.store';
import { ReplayCache } from './replay-cache';
import { ResumersCheck } from './resumers.check';
import { ResumersExplorer } from './resumers.explorer';

export const {
  ConfigurableModuleClass,
  MODULE_OPTIONS_TOKEN: IDEMPOTENCY_MODULE_OPTIONS,
  OPTIONS_TYPE: IDEMPOTENCY_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: IDEMPOTENCY_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<IdempotencyModuleOptions>().setClassMethodName('forRoot').build();

/** What an app must have registered for the module to run, said once, at startup. */
export const MISSING_TRANSACTIONS =
  'IdempotencyModule needs nestjs-cls with ClsPluginTransactional(TypeORM adapter): import transactionalClsModule() ' +
  "from 'safe-retries' next to TypeOrmModule.forRoot(...), or add that plugin to the app's own ClsModule.forRoot(...)";

/** The module's plumbing comes from the app; a clear startup error when it is not there. */
function required<T>(dependency: T | undefined): T {
  if (dependency === undefined) throw new Error(MISSING_TRANSACTIONS);
  return dependency;
}

/**
 * The idempotency module: `@Idempotent()` and everything behind it, for any
 * NestJS + TypeORM + PostgreSQL app (Express or Fastify) that has registered
 * TypeOrmModule and nestjs-cls's transactional plugin, and, while its purge or
 * recovery job is enabled, `ScheduleModule.forRoot()`: the jobs go into the
 * app's SchedulerRegistry. `forRoot(options)` or
 * `forRootAsync({ useFactory, inject, imports })`; see IdempotencyModuleOptions.
 */
@Global()
@Module({
  imports: [DiscoveryModule],
  providers: [
    { provide: IDEMPOTENCY_OPTIONS, useFactory: resolveIdempotencyOptions, inject: [IDEMPOTENCY_MODULE_OPTIONS] },
    {
      provide: IDEMPOTENCY_REGISTRY,
      useFactory: (o: IdempotencyModuleOptions) => o.registry ?? new Registry(),
      inject: [IDEMPOTENCY_MODULE_OPTIONS],
    },
    { provide: IDEMPOTENCY_TX_HOST, useFactory: required, inject: [{ token: TransactionHost, optional: true }] },
    { provide: IDEMPOTENCY_CLS, useFactory: required, inject: [{ token: ClsService, optional: true }] },
    {
      provide: IDEMPOTENCY_SCHEDULER,
      useFactory: idempotencyScheduler,
      inject: [IDEMPOTENCY_OPTIONS, { token: SchedulerRegistry, optional: true }],
    },
    IdempotencyMetrics,
    PostgresIdempotencyStore,
    // Built (and connected) from the `redis` option; null without it.
    {
      provide: RedisIdempotencyStore,
      useFactory: (o: ResolvedIdempotencyOptions) => (o.redis ? RedisIdempotencyStore.create(o.redis) : null),
      inject: [IDEMPOTENCY_OPTIONS],
    },
    IdempotencyStores,
    IdempotentRoutes,
    { provide: ReplayCache, useFactory: (o: ResolvedIdempotencyOptions) => new ReplayCache(o.replayCacheBytes), inject: [IDEMPOTENCY_OPTIONS] },
    IdempotencyInterceptor,
    IdempotencyContext,
    IdempotencyPurgeService,
    IdempotencyRecovery,
    ResumersExplorer,
    ResumersCheck,
    IdempotentConsumer,
    IdempotencyKeys,
  ],
  // The interceptor is instantiated in each module that declares @Idempotent() routes: what it injects is exported.
  exports: [
    IDEMPOTENCY_TX_HOST,
    IDEMPOTENCY_CLS,
    IDEMPOTENCY_OPTIONS,
    IdempotencyStores,
    IdempotentRoutes,
    IdempotencyMetrics,
    ReplayCache,
    IdempotencyInterceptor,
    IdempotencyContext,
    IdempotencyPurgeService,
    IdempotencyRecovery,
    IdempotentConsumer,
    IdempotencyKeys,
  ],
})
export class IdempotencyModule extends ConfigurableModuleClass {}
