import { ConfigurableModuleBuilder, DynamicModule, Global, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { TransactionHost } from '@nestjs-cls/transactional';
import { ClsModule, ClsService } from 'nestjs-cls';
import { Registry } from 'prom-client';
import { IdempotencyContext } from '../core/idempotency.context';
import { IdempotencyKeys } from './idempotency-keys.service';
import { IdempotencyInterceptor } from '../http/idempotency.interceptor';
import { IdempotencyMetrics } from '../telemetry/idempotency.metrics';
import { IdempotencyPurgeService } from '../purge/idempotency-purge.service';
import { IdempotencyRecovery } from '../recovery/idempotency-recovery.service';
import { IdempotentRoutes } from '../routes/idempotent-routes';
import { IDEMPOTENCY_POSTGRES_STORE, IdempotencyStores, REDIS_STORE } from '../stores/idempotency-stores';
import { IdempotentConsumer } from '../consumer/idempotent-consumer';
import { IDEMPOTENCY_CLS, IDEMPOTENCY_OPTIONS, IDEMPOTENCY_REGISTRY, IDEMPOTENCY_TX_HOST, ResolvedIdempotencyOptions, resolveIdempotencyOptions } from '../config/idempotency.options';
import { IdempotencyModuleOptions } from '../config/module-options';
import { IdempotencyMigrator } from '../migrations/idempotency-migrator';
import { Outbox } from '../outbox/outbox';
import { OutboxMetrics } from '../outbox/outbox-metrics';
import { OutboxRelay } from '../outbox/outbox-relay';
import { KeyTransactionWrites } from '../core/key-transaction-writes';
import { PostgresIdempotencyStore } from '../stores/postgres/postgres-idempotency.store';
import { ReplayCache } from '../core/replay-cache';
import { ResumersCheck } from '../recovery/resumers.check';
import { ResumersExplorer } from '../recovery/resumers.explorer';
import { transactionalPlugin } from '../config/transactional-cls';
import { TransactionsCheck } from '../core/transactions.check';

export const {
  ConfigurableModuleClass,
  MODULE_OPTIONS_TOKEN: IDEMPOTENCY_MODULE_OPTIONS,
  OPTIONS_TYPE: IDEMPOTENCY_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: IDEMPOTENCY_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<IdempotencyModuleOptions>().setClassMethodName('forRoot').build();

/**
 * The idempotency module: `@Idempotent()` and everything behind it, for any
 * NestJS + TypeORM + PostgreSQL app (Express or Fastify) that has registered
 * TypeOrmModule (its default data source). `forRoot(options)` or
 * `forRootAsync({ useFactory, inject, imports })`; see IdempotencyModuleOptions.
 *
 * It brings what it needs:
 * - the ambient transaction: nestjs-cls's transactional plugin on the data
 *   source (ClsModule.registerPlugins), which provides `TransactionHost`.
 *   The plugin keeps the transaction in nestjs-cls's context under one slot
 *   per connection name, so an app that registers the same plugin in its own
 *   ClsModule.forRoot(...) reaches the same transaction through either
 *   TransactionHost. Without nestjs-cls's middleware (or any context the app
 *   opens), the interceptor opens the request's context itself;
 * - its jobs (purge, recovery, the outbox's relay) on timers of its own: no
 *   scheduler to register;
 * - the PostgreSQL store, on the app's data source; any other store is given
 *   (`stores`), never loaded here, and runs with the module's lifecycle;
 * - its tables, migrated at startup (IdempotencyMigrator).
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
    { provide: IDEMPOTENCY_TX_HOST, useExisting: TransactionHost },
    { provide: IDEMPOTENCY_CLS, useExisting: ClsService },
    IdempotencyMigrator,
    KeyTransactionWrites,
    TransactionsCheck,
    IdempotencyMetrics,
    { provide: IDEMPOTENCY_POSTGRES_STORE, useClass: PostgresIdempotencyStore },
    // The store the app gives, or null: a provider, so that Nest runs its lifecycle (connect, close).
    { provide: REDIS_STORE, useFactory: (o: IdempotencyModuleOptions) => o.stores?.redis ?? null, inject: [IDEMPOTENCY_MODULE_OPTIONS] },
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
    OutboxMetrics,
    Outbox,
    OutboxRelay,
  ],
  // What an app injects, and what the module's own parts in other modules read.
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
    Outbox,
    OutboxRelay,
  ],
})
export class IdempotencyModule extends ConfigurableModuleClass {
  static override forRoot(options: typeof IDEMPOTENCY_OPTIONS_TYPE): DynamicModule {
    return withTransactions(super.forRoot(options));
  }

  static override forRootAsync(options: typeof IDEMPOTENCY_ASYNC_OPTIONS_TYPE): DynamicModule {
    return withTransactions(super.forRootAsync(options));
  }
}

/** The module with nestjs-cls's transactional plugin (its own instance, per app). */
function withTransactions(module: DynamicModule): DynamicModule {
  return { ...module, imports: [...(module.imports ?? []), ClsModule.registerPlugins([transactionalPlugin()])] };
}
